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
// file); the check runs each one emulated and compares two kinds of figure, as the
// cross-machine contract in the README states:
// - exact figures (step time, n_bits, wire bytes and calls per step): the simulated
//   clock and the traffic depend only on the cost model and the network model, in
//   dtsim's own double arithmetic, so they are bit-identical on every x86-64 machine and
//   must equal the baseline exactly; any difference is a change of behaviour.
// - floating-point figures (the final loss): the training math goes through LibTorch,
//   whose ATen kernels (ATEN_CPU_CAPABILITY) and OpenBLAS kernels (OPENBLAS_CORETYPE)
//   are picked per CPU, so the last bits move between machines. They are compared with a
//   relative tolerance: the entry's "final_loss_tolerance", else the file's
//   "float_tolerance" (default 1e-6). The sizes in bench/baselines/simulated.json are
//   measured, not guessed (`scripts/cpu-matrix.sh figures`, bench/results/cpu-matrix.md):
//   across 5 OpenBLAS core types x 2 ATen paths x 2 dtsim paths on an AMD EPYC and the
//   Intel AVX-512 machine the baseline came from, plain fp32 training moved by at most
//   1.7e-7 (two float ulps), so 1e-6 (~12 ulps) leaves a margin of 6x; CHOCO-SGD with
//   sign compression amplifies those last bits (a sign flips near zero) and moved by up
//   to 1.9e-4 (9 distinct results, standard deviation 6e-5), so its entry allows 1e-3
//   (5x the spread). What that still catches: a 1 % change of the learning rate moves
//   the plain scenarios' losses by 2.7e-5 to 5.7e-3 (caught); the sign scenario's loss
//   moves by 1.1e-3 at a 5 % change (caught) and 2.8e-4 at 1 % (not: its exact figures
//   and the algorithm tests in tests/ are what pin its math).
// On one machine, both kinds are reproducible bit for bit (two runs, same files).
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
