// top_k's settings (the entry and codec: top_k.cpp), what a scenario sets under
// /algorithm/compressor. LibTorch-free.
#pragma once

namespace dtsim::kernels {

struct TopKSettings {
  double ratio = 0.01;  // fraction of each tensor's elements kept, in [0, 1]
};

}  // namespace dtsim::kernels
