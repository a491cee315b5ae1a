// lr_schedule "warmup_cosine"'s settings (LrScheduleSpec::settings), counted in steps.
#pragma once

#include "algorithms/lr_schedules/step_span.hpp"

namespace dtsim::algorithms {

struct WarmupCosineSettings {
  StepSpan span;  // W, T
  double lr_min = 0.0;
};

}  // namespace dtsim::algorithms
