// The settings of a kind whose one field is `bucket` (one_bit, terngrad: one_bit.hpp,
// terngrad.hpp name it for their kind). LibTorch-free.
#pragma once

#include <cstdint>

namespace dtsim::kernels {

struct BucketSettings {
  // 0: one statistic per tensor; or B, a power of two in [32, 2^30]: one per bucket of B
  // elements, the tensors also cut at the flat buffer's multiples of B (bucket.hpp).
  std::int64_t bucket = 0;
};

}  // namespace dtsim::kernels
