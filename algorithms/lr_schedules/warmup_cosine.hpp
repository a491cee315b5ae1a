// lr_schedule "warmup_cosine"'s settings (LrScheduleSpec::settings), counted in steps.
#pragma once

#include <cstdint>

namespace dtsim::algorithms {

struct WarmupCosineSettings {
  std::int64_t warmup_steps = 0;  // W
  std::int64_t total_steps = 0;   // T; 0: the run's steps (echoed as 0)
  double lr_min = 0.0;
};

}  // namespace dtsim::algorithms
