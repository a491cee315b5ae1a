// The sweep table: one row per point, built from result JSON (RunResult::to_json) so
// that it reads every result file dtsim has written, old or new: a figure the result
// does not carry (compute time, test accuracy) is null in JSON and "-" in Markdown/CSV.
//
// Columns (per rank, rank-mean, per step unless stated):
//   axis values | step mean, p50, p99 (nearest rank) | compute, exposed communication
//   (step - compute) | n_bits (reference convention) | wire bytes | collective calls |
//   final loss (rank-averaged model), best per-step loss | accuracy, test accuracy |
//   time to target loss: simulated time at the end of the first step whose recorded
//   loss <= Targets::loss; time to target accuracy: the rank-mean clock of the first
//   evaluation whose test accuracy (training accuracy without a test set) >=
//   Targets::accuracy, and its step ("-" if never, or no target) | the step at which
//   the run diverged (runner/divergence.hpp; a Markdown column only when some row did,
//   and a note under the table) | collective reuse hit rate (emulated runs with reuse on).
//   Runs without losses (timing-only, shape-only workloads) have "-" for every loss and
//   accuracy figure, never a target reached.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/targets.hpp"

namespace dtsim::sweep {

// Figures of one run, from its result JSON.
struct RunFigures {
  std::vector<double> step_time_s, n_bits, loss, compute_s;  // per step (compute_s may be empty)
  double step_mean_s = 0, step_p50_s = 0, step_p99_s = 0;
  std::optional<double> compute_mean_s, exposed_comm_s;
  double n_bits_per_step = 0, wire_bytes_per_step = 0, calls_per_step = 0;
  std::optional<double> final_loss, best_loss, accuracy, test_loss, test_accuracy;
  std::optional<double> time_to_target_s;
  std::optional<double> time_to_accuracy_s;
  std::optional<long long> step_to_accuracy;  // the evaluated step, counted from 1
  std::optional<long long> diverged_at_step;  // runner/divergence.hpp's rule
  // Scheduled collectives replayed instead of simulated (collective_reuse.hpp), when the
  // run had reuse on.
  std::optional<double> reuse_hit_rate;
};

RunFigures figures_of(const nlohmann::json& result, const Targets& targets);

// Nearest-rank percentile (p in [0, 100]) of the values; 0 for none.
double percentile(std::vector<double> values, double p);

// The table as JSON: {"sweep", "target_loss", "target_accuracy", "axes": [names], "rows": [{"id", "label",
// "axes": [labels], <figures>}]}. `points` are the point files' JSON (point files hold
// "id", "label", "values" and "result") in manifest order; a missing point is skipped.
nlohmann::json make_table(const nlohmann::json& manifest, const std::vector<nlohmann::json>& points,
                          const Targets& targets);

std::string table_markdown(const nlohmann::json& table);
std::string table_csv(const nlohmann::json& table);

// "12.3 us"-style time.
std::string human_time(double seconds);

}  // namespace dtsim::sweep
