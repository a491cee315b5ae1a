// lr_schedule "cosine"'s settings (LrScheduleSpec::settings).
#pragma once

namespace dtsim::algorithms {

struct CosineSettings {
  double total_epochs = 0.0;  // T / S; 0: over the run's steps
  double lr_min = 0.0;        // the lr at T and after
};

}  // namespace dtsim::algorithms
