// What a sweep's time-to-target columns measure (sweep file fields target_loss and
// target_accuracy, or the command line's --target-loss / --target-accuracy).
#pragma once

#include <optional>

namespace dtsim::sweep {

struct Targets {
  // The end of the first step whose (per-step, rank-mean) training loss is at most this.
  std::optional<double> loss;
  // The first evaluation (Scenario::eval_every) of the rank-averaged model whose test
  // accuracy, or training accuracy without a test set, is at least this fraction.
  std::optional<double> accuracy;
};

}  // namespace dtsim::sweep
