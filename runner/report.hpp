// The latency/bits table a run prints, and the JSON file it writes beside it.
#pragma once

#include <filesystem>
#include <string>

#include "runner/run.hpp"

namespace dtsim::runner {

// A Markdown table: one row per phase (mean time per step, share of the step), then
// the step total, bits and bytes per step per rank, and the final loss.
std::string format_table(const RunResult& result);

// Writes result.to_json() to `file` atomically (temporary file, then rename), so an
// interrupted run never leaves a truncated result.
void write_json(const RunResult& result, const std::filesystem::path& file);

}  // namespace dtsim::runner
