// DTSIM_CUDA_CHECK, the one funnel for CUDA runtime errors in kernels/cuda (file:line,
// abort), and small launch helpers shared by the .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define DTSIM_CUDA_CHECK(call)                                                                               \
  do {                                                                                                       \
    cudaError_t err_ = (call);                                                                               \
    if (err_ != cudaSuccess) {                                                                               \
      std::fprintf(stderr, "dtsim: CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      std::abort();                                                                                          \
    }                                                                                                        \
  } while (0)

namespace dtsim::kernels::cuda {

inline int grid_for(std::int64_t n, int threads, int max_blocks = 65535) {
  std::int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<int>(b < max_blocks ? b : max_blocks);
}

// Index of the last segment whose offset is <= i (offsets nondecreasing, offsets[0] = 0).
__device__ __forceinline__ std::int64_t segment_of(const std::int64_t* offsets, std::int64_t L, std::int64_t i) {
  std::int64_t lo = 0, hi = L;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const std::int64_t mid = (lo + hi) / 2;
    if (offsets[mid] <= i)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Magnitude key (kernels/cpu/common.hpp mag_key): sign bit cleared, NaN above Inf.
__device__ __forceinline__ std::uint32_t mag_key(float v) { return __float_as_uint(v) & 0x7FFFFFFFu; }

}  // namespace dtsim::kernels::cuda
