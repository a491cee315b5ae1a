// lr_schedule "convex_decay"'s settings (LrScheduleSpec::settings): lr = a / (t - 1 + b).
#pragma once

namespace dtsim::algorithms {

struct ConvexDecaySettings {
  double a = 0.0;  // numerator (required in a scenario)
  double b = 0.0;  // offset of the iteration t - 1 (required in a scenario)
};

}  // namespace dtsim::algorithms
