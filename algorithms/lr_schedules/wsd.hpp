// lr_schedule "wsd"'s settings (LrScheduleSpec::settings), counted in steps.
#pragma once

#include <string>

#include "algorithms/lr_schedules/step_span.hpp"

namespace dtsim::algorithms {

struct WsdSettings {
  StepSpan span;                       // W, T
  double decay_fraction = 0.2;         // D = decay_fraction T: the last D steps decay
  std::string decay_shape = "1-sqrt";  // linear, cosine or 1-sqrt
  double lr_min = 0.0;
};

}  // namespace dtsim::algorithms
