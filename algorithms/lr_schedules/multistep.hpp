// lr_schedule "multistep"'s settings (LrScheduleSpec::settings): the reference's MultiStepLR.
#pragma once

#include <vector>

namespace dtsim::algorithms {

struct MultistepSettings {
  std::vector<double> milestones;  // epochs, strictly ascending (required in a scenario)
  double gamma = 0.1;              // factor per milestone passed
};

}  // namespace dtsim::algorithms
