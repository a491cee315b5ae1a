// terngrad's settings (the entry and codec: terngrad.cpp), what a scenario sets under
// /algorithm/compressor besides the seed. LibTorch-free.
#pragma once

#include <cstdint>

namespace dtsim::kernels {

struct TernGradSettings {
  std::int64_t bucket = 0;  // 0: one scale per tensor; or B (bucket.hpp): one per bucket
};

}  // namespace dtsim::kernels
