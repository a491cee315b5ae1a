// lr_schedule "wsd"'s settings (LrScheduleSpec::settings), counted in steps.
#pragma once

#include <cstdint>
#include <string>

namespace dtsim::algorithms {

struct WsdSettings {
  std::int64_t warmup_steps = 0;  // W
  std::int64_t total_steps = 0;   // T; 0: the run's steps (echoed as 0)
  double decay_fraction = 0.2;    // D = decay_fraction T: the last D steps decay
  std::string decay_shape = "1-sqrt";  // linear, cosine or 1-sqrt
  double lr_min = 0.0;
};

}  // namespace dtsim::algorithms
