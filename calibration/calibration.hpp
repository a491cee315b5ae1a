// calibration: fitting the network model's alpha and beta to a live job.
//
// measure() times a short series of operations on the live communicator of every rank
// (ring all-reduce, all-gather, and a ping-pong between rank 0 and one peer per link
// class), each preceded by a barrier, and keeps the median over iterations of the
// rank-mean time. fit() finds the alpha (per-message latency plus overhead, seconds) and
// beta (bandwidth, bytes/s) of the alpha-beta closed forms (network_models/closed_form.hpp)
// that best explain the samples: every closed form is linear in alpha and 1/beta,
//
//   t_i ~ a_i alpha + b_i / beta,   a_i = T_i(alpha = 1, beta = inf),  b_i = T_i(alpha = 0, beta = 1)
//
// and fit() minimises the sum of squared *relative* errors ((t_i - a_i alpha - b_i/beta)/t_i)^2,
// so that bytes-sized and megabyte-sized messages weigh alike (2x2 normal equations).
// A point-to-point message of S bytes is one alpha plus S/beta.
//
// The network model file (model_json / load_model) is what a scenario references with
// "network": {"calibrated": "model.json"}: its "model", "latency_us" and
// "bandwidth_GBps" stand in for the scenario's own (fields set in the scenario win), and
// "links" holds the fit per link class when the job had more than one (the same host,
// another host), from the point-to-point probes.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "comm/communicator.hpp"
#include "sim/task.hpp"

namespace dtsim::calibration {

enum class Probe { AllReduce, AllGather, PointToPoint };
std::string to_string(Probe p);

struct Sample {
  Probe probe = Probe::AllReduce;
  int ranks = 2;
  double bytes = 0.0;    // all-reduce: the tensor; all-gather: each rank's block; p2p: the message
  double seconds = 0.0;  // measured
  std::string link = "all";  // p2p: "same_host" or "other_host"; collectives: "all"
};

struct LinkFit {
  double alpha_s = 0.0;
  double beta_bytes_per_s = 0.0;
};

// (a, b) of the sample's closed form: seconds = a * alpha + b / beta.
std::pair<double, double> coefficients(const Sample& s);
double predict(const Sample& s, const LinkFit& fit);
// Least squares on relative error; alpha is clamped at 0 (then refitted). Throws
// std::invalid_argument when the samples cannot determine beta (fewer than two sizes).
LinkFit fit(const std::vector<Sample>& samples);

struct MeasureOptions {
  std::vector<Probe> probes = {Probe::AllReduce, Probe::AllGather, Probe::PointToPoint};
  std::vector<std::int64_t> sizes;  // bytes, multiples of 4 (float32 elements)
  int warmup = 2;
  int iters = 5;
  at::Device device = at::kCPU;  // CUDA for the NCCL backend
};
// Sizes from `min` to `max` bytes, multiplying by `factor` (rounded to 4 bytes).
std::vector<std::int64_t> geometric_sizes(std::int64_t min, std::int64_t max, double factor);

// Runs on every rank of the job; every rank returns the same samples.
sim::Task<std::vector<Sample>> measure(comm::Communicator& comm, MeasureOptions options);

struct NetworkModel {
  std::string model = "alpha_beta";  // how the emulated network moves messages
  LinkFit nominal;
  std::map<std::string, LinkFit> links;  // per link class, when the job had more than one
};

// The model file: the fit, and every sample with its prediction and relative error; when
// the fit describes the samples poorly, also "warning" (fit_warning's text).
nlohmann::json model_json(const NetworkModel& model, const std::vector<Sample>& samples, const std::string& backend);

// A fit whose median absolute relative error is above this describes the measurements too
// poorly to time a scenario by: `dtsim calibrate` warns and the model file says so.
inline constexpr double kPoorFitMedianError = 0.2;
// The warning for a fit with this median absolute relative error, or "" for a good one.
std::string fit_warning(double median_abs_relative_error);
// Reads a model file; throws std::invalid_argument naming the file and the field.
NetworkModel load_model(const std::filesystem::path& file);

// Fits the nominal link from the all-reduce samples (what the emulated network charges
// most; every sample when there are none) and one link per class from the
// point-to-point samples when there is more than one class. On one machine Gloo's
// all-reduce (loopback TCP, reductions, processes sharing cores) and its point-to-point
// messages see very different alpha and beta, so one joint fit would serve neither.
NetworkModel fit_model(const std::vector<Sample>& samples);

}  // namespace dtsim::calibration
