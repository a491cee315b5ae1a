// Running a scenario: the same rank program, emulated (all ranks in this process on the
// simulated network) or live (this process is one rank of a job over Gloo).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/live_env.hpp"
#include "comm/op_trace.hpp"
#include "network_models/collective_reuse.hpp"
#include "runner/scenario.hpp"

namespace dtsim::runner {

// Where a run is, for a progress line (runner/progress.hpp).
struct RunProgress {
  std::string stage;         // "" for a run; in timing-only mode "rank 0's kernels", then "replay"
  std::int64_t step = 0;     // steps done
  std::int64_t steps = 0;
  double simulated_s = 0.0;  // rank 0's clock
};

struct RunOptions {
  // When set, every rank writes its parameters after the last step to
  // "<prefix>.rank<r>.json" (for comparing runs and backends).
  std::optional<std::filesystem::path> dump_params_prefix;
  // When set, an emulated run writes its timeline (every rank's phases, every message)
  // as Chrome/Perfetto trace-event JSON to this file.
  std::optional<std::filesystem::path> trace_file;
  // Live runs: the communication backend, "gloo" or "nccl".
  std::string live_backend = "gloo";
  // When set, every rank this process runs records its OpTrace (comm/recording.hpp)
  // here: all ranks, in rank order, for an emulated run; its one rank for a live run.
  std::vector<comm::OpTrace>* record_traces = nullptr;
  // When set, every rank this process runs also writes its trace to
  // "<dir>/rank<r>.trace" (comm::to_bytes), for `dtsim replay`.
  std::optional<std::filesystem::path> record_trace_dir;
  // When set, called at the end of every step of rank 0 (the rank this process runs, for a
  // live run; the representative, then rank 0's replay, in timing-only mode; rank 0's
  // replay for replay_traces). It observes only: nothing it sees changes the results.
  std::function<void(const RunProgress&)> progress;
};

// A live run that failed part-way: the one-line error, and what this rank measured so far
// (per-step times and phases, traffic), which `dtsim live` writes as a partial result.
class LiveRunFailed : public std::runtime_error {
 public:
  LiveRunFailed(const std::string& what, nlohmann::json partial)
      : std::runtime_error(what), partial_(std::move(partial)) {}
  const nlohmann::json& partial() const { return partial_; }

 private:
  nlohmann::json partial_;
};

// What a run measured. All figures are per rank, averaged over ranks (and over steps
// where it says so); every rank of a run ends with the same RunResult.
struct RunResult {
  std::string mode;     // "emulated" or "live"
  std::string backend;  // "emulated", "gloo"
  Scenario scenario;
  std::vector<std::string> phase_names;  // in order of first use
  std::vector<double> phase_mean_s;      // mean seconds per step
  // Per step, mean over ranks:
  std::vector<double> step_time_s, n_bits, wire_bytes, calls, loss;
  // Per step, mean over ranks: seconds of the step the rank spent computing
  // (Communicator::compute_seconds); step_time_s minus this is the communication not
  // hidden behind compute (and waiting for other ranks).
  std::vector<double> compute_time_s;
  // Per step, mean over ranks: the learning rate the step ran at (algorithm.lr_schedule;
  // one value on every rank unless a graph scale-up meets neighbourhoods of different
  // sizes). Empty, and absent from the JSON, for the default constant lr.
  std::vector<double> lr;
  // The rank-averaged model after the last step, on the whole training set:
  double final_loss = 0.0;
  double final_accuracy = 0.0;
  // ... and on the workload's test set; NaN when it has none (JSON null).
  double final_test_loss = 0.0;
  double final_test_accuracy = 0.0;
  // The rank-averaged model every Scenario::eval_every steps and after the last step
  // (after Algorithm::before_evaluation: SINGA's partial update averages every rank's
  // model first). time_s: the rank-mean clock at the end of that step, not counting
  // the evaluations before it. Test figures NaN without a test set.
  struct EvalPoint {
    std::int64_t step = 0;
    double time_s = 0.0;
    double train_loss = 0.0;
    double train_accuracy = 0.0;
    double test_loss = 0.0;
    double test_accuracy = 0.0;
  };
  std::vector<EvalPoint> eval;
  double consensus_distance = 0.0;  // mean_i ||x_i - x_bar||^2
  // Bytes of model-sized algorithm state per rank (Algorithm::state_bytes after the last
  // step: replicas, memories), mean over ranks.
  double algorithm_state_bytes = 0.0;
  // The step (1-based) at which the run diverged by runner/divergence.hpp's rule; 0 when it
  // did not, or computes no loss (it still runs to the end).
  std::int64_t diverged_at_step = 0;
  // Why the run has no loss or accuracy figures (all NaN, JSON null): a timing-only run,
  // a replay, a workload without real math; empty when it has them.
  std::string no_loss_reason;
  // Timing-only mode (Scenario::timing_only): the rank whose operations every rank
  // replayed; loss, accuracy and consensus figures are NaN (JSON null) and n_bits and
  // algorithm_state_bytes are that rank's.
  bool timing_only = false;
  int representative_rank = 0;
  // A replay (replay_traces, `dtsim replay`): where the traces came from; empty otherwise.
  std::string replayed_from;
  // Emulated runs: a hash of the engine's fired events (time, order, kind), equal for
  // two runs exactly when their event traces are; 0 for live runs.
  std::uint64_t event_trace_hash = 0;
  // Emulated runs: collective reuse (network_models/collective_reuse.hpp): whether it was
  // on (network.reuse_collectives, not with a trace file, not for closed-form models),
  // and how many scheduled collectives were replayed instead of simulated. With reuse,
  // the engine fires fewer events, so event_trace_hash differs from a run without it;
  // every time and count is the same.
  struct Reuse {
    bool enabled = false;
    net::ReuseStats stats;
  };
  Reuse reuse;

  // The rank-mean simulated clock at the end of the last step, evaluations not counted
  // (the clock a time to target is read on).
  double simulated_time_s() const;
  double mean_step_time_s() const;
  double mean_n_bits() const;
  double mean_wire_bytes() const;
  double mean_calls() const;
  double mean_compute_time_s() const;
  // The busiest step's rate: max over steps of n_bits[t] / step_time_s[t] (and of the wire
  // bytes); 0 without steps or bits.
  double peak_n_bits_per_s() const;
  double peak_wire_bytes_per_s() const;
  nlohmann::json to_json() const;

 private:
  // Parts of the result file (to_json).
  nlohmann::json eval_json() const;
  nlohmann::json phases_json(double step) const;
  nlohmann::json per_step_json() const;
};

RunResult run_emulated(const Scenario& scenario, const RunOptions& options = {});
RunResult run_live(const Scenario& scenario, const comm::LiveEnv& env, const RunOptions& options = {});

// A trace-driven prediction: rank r issues traces[r] (recorded by a run with
// RunOptions::record_traces, live or emulated) again on the scenario's emulated network,
// each compute taking its recorded seconds (which already hold any slowdown). The
// result's timing figures and n_bits are rank means as in a run; loss, accuracy, state
// and consensus figures are NaN (a replay moves sizes, not data).
RunResult replay_traces(const Scenario& scenario, const std::vector<comm::OpTrace>& traces,
                        const RunOptions& options = {});

// The trace files of `dir` for the scenario's ranks ("rank<r>.trace", as
// RunOptions::record_trace_dir writes them); a missing or malformed file is bad input
// (std::invalid_argument naming the file).
std::vector<comm::OpTrace> read_traces(const std::filesystem::path& dir, int ranks);

}  // namespace dtsim::runner
