// `dtsim report`: SVG figures from result files, point files and sweep directories.
//
//   loss_vs_time.svg            per-step loss against cumulative simulated time, one line per run
//   loss_vs_bits.svg            per-step loss against cumulative n_bits per rank
//   step_time_vs_<axis>.svg     per sweep directory and axis: mean step time against the
//                               axis values (numbers on a linear or log axis, anything else
//                               as categories), one line per combination of the other axes
//                               (file names get a "<sweep>." prefix when there are several sweeps)
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::sweep {

struct LabelledResult {
  std::string label;
  nlohmann::json result;  // RunResult::to_json()
};

// Reads the runs named by one input (a result JSON, a point JSON, or a sweep output
// directory); throws SweepError naming the input when it is none of these.
std::vector<LabelledResult> read_runs(const std::filesystem::path& input);

// Writes the figures for `inputs` into `out_dir`; returns the files written.
std::vector<std::filesystem::path> write_report(const std::vector<std::filesystem::path>& inputs,
                                                const std::filesystem::path& out_dir);

}  // namespace dtsim::sweep
