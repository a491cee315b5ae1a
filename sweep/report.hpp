// `dtsim report`: SVG figures from result files, point files and sweep directories.
//
//   step_time_vs_step.svg       simulated step time against step, one line per run: every
//                               run has step times, timing-only runs included
//   loss_vs_time.svg            per-step loss (a trailing mean) against cumulative simulated
//                               time, one line per run that has a finite loss
//   loss_vs_bits.svg            the same against cumulative n_bits per rank
//   accuracy_vs_time.svg        test accuracy at each evaluation against simulated time, for
//                               runs evaluated on a test set (when any is)
//   step_time_vs_<axis>.svg     per sweep directory and axis: mean step time against the
//                               axis values, one series per combination of the other axes
//                               that vary; numbers on a linear or log axis joined by lines,
//                               anything else as categories: markers, no line (categories
//                               have no order); file names get a "<sweep>." prefix when
//                               there are several sweeps
//
// Time and bits axes start at 0 (linear ones). A legend entry lists the values of the axes
// that vary, their names said once as the legend's heading. A run that diverged
// (`diverged_at_step`) has an 'x' at that step and " (diverged at step N)" in its legend
// entry; its loss curve stops there (runner/divergence.hpp's rule); in step-time-vs-
// axis figures its point is an 'x'. A run a figure cannot show (no finite loss, no step
// times) is left out of it, and the report names each such (figure, run) pair.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::sweep {

struct LabelledResult {
  std::string label;         // legend entry: the values of the axes that vary ("ring, flow"), or the scenario's name
  std::string legend_group;  // what the labels list ("topology, model"); empty for a result file
  std::string run_name;      // the run on its own in a message: a sweep point's own label, or the scenario's name
  nlohmann::json result;     // RunResult::to_json()
};

// Reads the runs named by one input (a result JSON, a point JSON, or a sweep output
// directory); throws SweepError naming the input when it is none of these.
std::vector<LabelledResult> read_runs(const std::filesystem::path& input);

struct Report {
  std::vector<std::filesystem::path> written;
  // "<figure>: left out <run>: <why>", one per figure and run that it could not show.
  std::vector<std::string> left_out;
};

// Writes the figures for `inputs` into `out_dir`. Throws SweepError (writing nothing)
// when no input holds a finished run or no figure can be drawn.
Report write_report(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out_dir);

}  // namespace dtsim::sweep
