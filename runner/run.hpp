// Running a scenario: the same rank program, emulated (all ranks in this process on the
// simulated network) or live (this process is one rank of a job over Gloo).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/live_env.hpp"
#include "runner/scenario.hpp"

namespace dtsim::runner {

struct RunOptions {
  // When set, every rank writes its parameters after the last step to
  // "<prefix>.rank<r>.json" (for comparing runs and backends).
  std::optional<std::filesystem::path> dump_params_prefix;
  // When set, an emulated run writes its timeline (every rank's phases, every message)
  // as Chrome/Perfetto trace-event JSON to this file.
  std::optional<std::filesystem::path> trace_file;
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
  // The rank-averaged model after the last step, on the whole training set:
  double final_loss = 0.0;
  double final_accuracy = 0.0;
  double consensus_distance = 0.0;  // mean_i ||x_i - x_bar||^2
  // Bytes of model-sized algorithm state per rank (Algorithm::state_bytes after the last
  // step: replicas, memories), mean over ranks.
  double algorithm_state_bytes = 0.0;
  // The first step (1-based) whose rank-mean loss exceeds kDivergedLoss or is NaN, as the
  // reference's divergence abort; 0 when the run did not diverge (it still runs to the end).
  std::int64_t diverged_at_step = 0;
  // Emulated runs: a hash of the engine's fired events (time, order, kind), equal for
  // two runs exactly when their event traces are; 0 for live runs.
  std::uint64_t event_trace_hash = 0;

  double mean_step_time_s() const;
  double mean_n_bits() const;
  double mean_wire_bytes() const;
  double mean_calls() const;
  nlohmann::json to_json() const;
};

inline constexpr double kDivergedLoss = 1e3;

RunResult run_emulated(const Scenario& scenario, const RunOptions& options = {});
RunResult run_live(const Scenario& scenario, const comm::LiveEnv& env, const RunOptions& options = {});

}  // namespace dtsim::runner
