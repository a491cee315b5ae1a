// threshold's settings (the entry and codec: threshold.cpp), what a scenario sets under
// /algorithm/compressor. LibTorch-free.
#pragma once

namespace dtsim::kernels {

struct ThresholdSettings {
  double threshold = 0.0;  // keep |x| >= threshold (finite, >= 0)
};

}  // namespace dtsim::kernels
