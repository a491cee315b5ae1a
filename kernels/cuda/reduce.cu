// Canonical per-segment sums on the GPU; see reduce.cuh and kernels/cpu/common.hpp.
// Napkin math: one read of x (n * 4 bytes) plus 4 bytes per 1024 elements of partials.
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/detail/quantizers.hpp"

namespace dtsim::kernels::cuda {

namespace {

constexpr std::int64_t kChunk = 1024;

__device__ __forceinline__ float warp_fold(float v) {
  for (int off = 16; off >= 1; off /= 2) v = __fadd_rn(v, __shfl_down_sync(0xFFFFFFFFu, v, off));
  return v;
}

// One warp per chunk; for every segment overlapping the chunk, lane l sums rows r of
// element 1024c + 32r + l (+0 outside the segment), then the warp folds.
__global__ void chunk_partials_kernel(const float* __restrict__ x, std::int64_t n, const std::int64_t* offsets,
                                      std::int64_t L, const std::int64_t* slot_begin, ChunkOp op,
                                      float* __restrict__ partials) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  for (std::int64_t c = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; c < chunks;
       c += warps) {
    const std::int64_t base = c * kChunk, end = base + kChunk < n ? base + kChunk : n;
    for (std::int64_t s = segment_of(offsets, L, base); s < L && offsets[s] < end; ++s) {
      const std::int64_t a = offsets[s] > base ? offsets[s] : base;
      const std::int64_t b = offsets[s + 1] < end ? offsets[s + 1] : end;
      if (b <= a) continue;
      float acc = 0.0f;
      for (int r = 0; r < 32; ++r) {
        const std::int64_t i = base + 32 * r + lane;
        float v = 0.0f;
        if (i >= a && i < b) {
          const float xi = x[i];
          switch (op) {
            case ChunkOp::abs: v = fabsf(xi); break;
            case ChunkOp::square: v = __fmul_rn(xi, xi); break;
            case ChunkOp::non_negative_part: v = detail::non_negative_part(xi); break;
            case ChunkOp::negative_part: v = detail::negative_part(xi); break;
          }
        }
        acc = __fadd_rn(acc, v);
      }
      acc = warp_fold(acc);
      if (lane == 0) partials[slot_begin[s] + c - offsets[s] / kChunk] = acc;
    }
  }
}

__global__ void fold_partials_kernel(float* partials, std::int64_t slots, const std::int64_t* slot_begin,
                                     std::int64_t L, float* out) {
  for (std::int64_t s = blockIdx.x; s < L; s += gridDim.x) {
    std::int64_t m = slot_begin[s + 1] - slot_begin[s];
    if (m == 0) {
      if (threadIdx.x == 0) out[s] = 0.0f;
      continue;
    }
    float* src = partials + slot_begin[s];
    float* dst = partials + slots + slot_begin[s];
    while (m > 1) {
      const std::int64_t half = m / 2;
      for (std::int64_t i = threadIdx.x; i < half; i += blockDim.x) dst[i] = __fadd_rn(src[2 * i], src[2 * i + 1]);
      if (threadIdx.x == 0 && m % 2 == 1) dst[half] = src[m - 1];
      __syncthreads();
      float* t = src;
      src = dst;
      dst = t;
      m = half + m % 2;
    }
    if (threadIdx.x == 0) out[s] = src[0];
    __syncthreads();
  }
}

}  // namespace

void chunk_partials(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::int64_t* slot_begin, ChunkOp op, float* partials, cudaStream_t stream) {
  if (n == 0) return;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  chunk_partials_kernel<<<grid_for(chunks * 32, 256), 256, 0, stream>>>(x, n, offsets, L, slot_begin, op, partials);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void fold_partials(float* partials, std::int64_t slots, const std::int64_t* slot_begin, std::int64_t L, float* out,
                   cudaStream_t stream) {
  if (L == 0) return;
  fold_partials_kernel<<<static_cast<int>(L < 4096 ? L : 4096), 256, 0, stream>>>(partials, slots, slot_begin, L, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dtsim::kernels::cuda
