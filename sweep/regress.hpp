// Performance regression checks for CI (bench/regress.cpp is the command line).
//
// Benchmarks: a baseline file lists benchmarks, each judged by a ratio measured within
// one run, so that a slower or busier machine moves both sides together:
//   {"name": "BM_X/..", "counter": "x_memcpy", "ratio": r}       a counter that already is
//                                                                 a same-run ratio
//   {"name": "BM_X/..", "reference": "BM_Y/..", "ratio": r}      reference time / own time
// (cpu_time; a repetition median when the run has aggregates). Higher is better. A
// benchmark fails when its ratio falls below r * (1 - margin) (margin from the entry, else
// from the file, default 0.25), or when it is missing from the run.
//
// Simulated figures: a baseline file lists scenarios (paths relative to the baseline
// file) with step time, n_bits, wire bytes and calls per step and the final loss; the
// check runs each scenario emulated and fails on any relative difference above
// `tolerance` (default 1e-9). These are deterministic: a change of one is a change of
// behaviour (a different bandwidth, cost model or algorithm), never noise.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::sweep {

struct CheckOutcome {
  bool ok = true;
  std::string table;  // Markdown: one row per entry checked, failures marked
  std::vector<std::string> failures;
};

// `runs`: Google Benchmark JSON outputs (--benchmark_format=json or --benchmark_out).
CheckOutcome check_benchmarks(const nlohmann::json& baseline, const std::vector<nlohmann::json>& runs);
// The baseline with every entry's ratio replaced by the one measured in `runs`.
nlohmann::json refresh_benchmarks(const nlohmann::json& baseline, const std::vector<nlohmann::json>& runs);

CheckOutcome check_simulated(const nlohmann::json& baseline, const std::filesystem::path& baseline_dir);
nlohmann::json refresh_simulated(const nlohmann::json& baseline, const std::filesystem::path& baseline_dir);

}  // namespace dtsim::sweep
