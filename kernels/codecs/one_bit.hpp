// one_bit's settings (the entry and codec: one_bit.cpp), what a scenario sets under
// /algorithm/compressor. LibTorch-free.
#pragma once

#include <cstdint>

namespace dtsim::kernels {

struct OneBitSettings {
  std::int64_t bucket = 0;  // 0: one pair of means per tensor; or B (bucket.hpp): one per bucket
};

}  // namespace dtsim::kernels
