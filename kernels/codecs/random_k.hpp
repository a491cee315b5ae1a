// random_k's settings (the entry and codec: random_k.cpp), what a scenario sets under
// /algorithm/compressor besides the seed. LibTorch-free.
#pragma once

namespace dtsim::kernels {

struct RandomKSettings {
  double ratio = 0.01;       // fraction of each tensor's elements kept, in [0, 1]
  bool shared_seed = false;  // every rank draws the same indices, which are not sent
  bool unbiased = false;     // values scaled by numel / k (the reference never does)
};

}  // namespace dtsim::kernels
