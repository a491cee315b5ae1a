// qsgd's settings (the entry and codec: qsgd.cpp), what a scenario sets under
// /algorithm/compressor besides the seed. LibTorch-free.
#pragma once

#include <cstdint>

namespace dtsim::kernels {

struct QsgdSettings {
  int levels = 15;           // s, in [2, 256] (the reference's 2^bits - 1)
  bool tau_rescale = false;  // norm times 1 / (min(d / s^2, sqrt(d) / s) + 1), CHOCO's biased QSGD
  // 0 (one norm per tensor, the reference) or B, a power of two in [32, 2^30]: one per
  // bucket, the tensors also cut at the flat buffer's multiples of B (QSGD's bucketed
  // variant; d in tau_rescale is then the bucket's size). Buckets let the CPU encoder read
  // its input once, a block of whole buckets at a time, instead of twice.
  std::int64_t bucket = 0;
};

}  // namespace dtsim::kernels
