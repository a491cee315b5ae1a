// calibration::compare: how well the calibrated network model predicts a live job.
//
// Run on every rank of a live job: the scenario runs live (measured), every rank
// recording its operations and compute (comm/recording.hpp). Rank 0 then predicts it
// twice on the calibrated network model: emulated, with compute timed by running the
// ranks one after another in this process (predicted: what a user without a cluster
// gets), and by replaying every live rank's trace (replayed: the live compute, the
// model's communication — the error of the network model alone). Then a ring
// all-reduce sweep (default 1 KB to 64 MB) is measured live and predicted by the
// model's closed form. The traces and the sweep go over a second rendezvous at
// MASTER_PORT + 1, since the scenario's communicator has closed its store by then.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibration/calibration.hpp"
#include "comm/live_env.hpp"
#include "runner/scenario.hpp"

namespace dtsim::calibration {

struct CompareOptions {
  NetworkModel model;
  std::string backend = "gloo";
  std::vector<std::int64_t> sweep_sizes = geometric_sizes(1024, 64 << 20, 2.0);
  int warmup = 2;
  int iters = 5;
};

struct Comparison {
  nlohmann::json json;  // per phase, per step and per size: measured, predicted, relative error
  std::string table;    // the same as text tables (rank 0)
};

// The scenario with the model's network and measured compute timing.
runner::Scenario with_model(runner::Scenario s, const NetworkModel& model);

// Every rank returns; only rank 0's Comparison holds the emulated side and the tables.
Comparison compare(const runner::Scenario& scenario, const comm::LiveEnv& env, const CompareOptions& options);

// Measured versus predicted per sample (point-to-point ones by their link class's fit),
// and the median relative error over sizes >= 1 MB.
std::string samples_table(const std::vector<Sample>& samples, const NetworkModel& model);

}  // namespace dtsim::calibration
