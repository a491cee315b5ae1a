#include "cli/sweep_command.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "cli/exit_codes.hpp"
#include "sweep/execute.hpp"
#include "sweep/sweep.hpp"
#include "sweep/table.hpp"

namespace dtsim::cli {

namespace fs = std::filesystem;

namespace {

// "i/N" with 1 <= i <= N -> (i - 1, N).
std::pair<int, int> parse_shard(const std::string& text) {
  int i = 0, n = 0;
  char slash = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d %c %d %c", &i, &slash, &n, &extra) != 3 || slash != '/' || n < 1 || i < 1 || i > n)
    throw sweep::SweepError(fmt::format("--shard: expected i/N with 1 <= i <= N (e.g. 1/4), got \"{}\"", text));
  return {i - 1, n};
}

// A target accuracy: a fraction in (0, 1], as the sweep file's target_accuracy (0 would
// be reached at the first evaluation, 75 means 75 %: both mistakes, not targets).
const CLI::Validator kAccuracyFraction(
    [](std::string& text) {
      double v = 0;
      try {
        v = std::stod(text);
      } catch (const std::exception&) {
        return std::string("expected a number");
      }
      return v > 0.0 && v <= 1.0 ? std::string() : std::string("expected a fraction in (0, 1] (0.75 for 75 %)");
    },
    "FRACTION in (0, 1]");

}  // namespace

SweepCommands::SweepCommands(CLI::App& app) {
  sweep_ = app.add_subcommand(
      "sweep", "Run every point of a sweep file (a base scenario and axes of values; README.md, section Sweeps) "
               "emulated, in parallel, resumably: finished points are kept in OUT/points and skipped on a rerun; "
               "prints the table and writes OUT/table.{md,csv,json}");
  sweep_->add_option("sweep", file_, "Sweep JSON file")->required();
  sweep_->add_option("--out", out_, "Output directory (default: results/<sweep file stem>)");
  sweep_->add_option("--jobs,-j", jobs_, "Points run at once, each in a process of its own on one thread (default: one "
                                         "per core); a point's results do not depend on it")
      ->check(CLI::PositiveNumber);
  sweep_->add_option("--point-memory-GB", point_memory_gb_, "Limit each point's memory (its private writable memory: "
                                                             "heap, mappings, stacks) to this many GB: a point that needs "
                                                             "more fails alone (default: no limit)")
      ->check(CLI::PositiveNumber);
  sweep_->add_option("--shard", shard_, "Run only slice i of N (points whose index % N == i - 1); combine with "
                                        "`dtsim merge`");
  sweep_->add_option("--target-loss", target_loss_, "Report the simulated time to reach this training loss "
                                                    "(overrides the sweep file's target_loss)");
  sweep_->add_option("--target-accuracy", target_accuracy_, "Report the simulated time and step of the first evaluation "
                                                            "reaching this test accuracy, a fraction (overrides the "
                                                            "sweep file's target_accuracy)")
      ->check(kAccuracyFraction);
  sweep_->add_flag("--quiet", quiet_, "Do not print the table");

  merge_ = app.add_subcommand("merge", "Combine the output directories of shards of one sweep (error on conflicting "
                                       "or missing points); prints the table and writes OUT/table.{md,csv,json}");
  merge_->add_option("dirs", inputs_, "Sweep output directories")->required();
  merge_->add_option("--out", out_, "Output directory")->required();
  merge_->add_option("--target-loss", target_loss_, "Target loss for the time-to-target column");
  merge_->add_option("--target-accuracy", target_accuracy_, "Target test accuracy (a fraction) for the time-to-accuracy "
                                                            "columns")
      ->check(kAccuracyFraction);
  merge_->add_flag("--quiet", quiet_, "Do not print the table");

  report_ = app.add_subcommand("report", "Draw SVG figures from result files and sweep directories: step time against "
                                         "step, loss against simulated time and against cumulative bits, test accuracy "
                                         "against simulated time, and step time against each sweep axis; prints the "
                                         "files written, and on stderr each run a figure leaves out and why");
  report_->add_option("results", inputs_, "Result JSON files, sweep point files or sweep output directories")->required();
  report_->add_option("--out", out_, "Directory for the SVG files")->required();
}

std::optional<int> SweepCommands::run() const {
  if (sweep_->parsed()) return exit_code_of([&] { return run_sweep(); });
  if (merge_->parsed()) return exit_code_of([&] { return run_merge(); });
  if (report_->parsed()) return exit_code_of([&] { return run_report(); });
  return std::nullopt;
}

int SweepCommands::run_sweep() const {
  sweep::ExecuteOptions options;
  if (!shard_.empty()) std::tie(options.shard, options.shards) = parse_shard(shard_);
  auto s = sweep::load_sweep(file_);
  if (sweep_->count("--target-loss")) s.targets.loss = target_loss_;
  if (sweep_->count("--target-accuracy")) s.targets.accuracy = target_accuracy_;
  options.out_dir = out_.empty() ? fs::path("results") / fs::path(file_).stem() : fs::path(out_);
  options.jobs = jobs_;
  options.point_memory_bytes = static_cast<std::uint64_t>(point_memory_gb_ * 1e9);
  options.progress_bar = ::isatty(STDOUT_FILENO) != 0;
  const auto outcome = sweep::execute_sweep(s, options, std::cout);
  if (!quiet_) std::cout << "\n" << sweep::table_markdown(outcome.table);
  std::cout << fmt::format("table: {}\n", (options.out_dir / "table.md").string());
  for (const auto& f : outcome.failures) fmt::print(stderr, "dtsim: {}\n", f);
  return outcome.failures.empty() ? 0 : 1;
}

int SweepCommands::run_merge() const {
  std::vector<fs::path> dirs(inputs_.begin(), inputs_.end());
  sweep::Targets targets;
  if (merge_->count("--target-loss")) targets.loss = target_loss_;
  if (merge_->count("--target-accuracy")) targets.accuracy = target_accuracy_;
  const auto table = sweep::merge_sweeps(dirs, out_, targets);
  if (!quiet_) std::cout << sweep::table_markdown(table);
  std::cout << fmt::format("merged {} points from {} directories into {}\n", table["rows"].size(), dirs.size(), out_);
  return 0;
}

}  // namespace dtsim::cli
