// dtsim's version (CMake's project version) and the version of the result files it writes.
#pragma once

namespace dtsim::runner {

// Written as "dtsim_version" into every result file and printed by `dtsim --version`.
extern const char* const kDtsimVersion;

// "dtsim_result_version": 2 names final.train_loss / train_accuracy (1: loss / accuracy)
// and adds simulated_time_s, step_percentiles_s, no_loss_reason and dtsim_version.
inline constexpr int kResultVersion = 2;

}  // namespace dtsim::runner
