// Sign compression on the GPU: warp-level bit packing with __ballot_sync (one 32-bit word
// per warp instruction), the scaled-sign scales by the canonical reduction (reduce.cuh),
// the decoder, and the majority vote. Bit-identical to kernels/cpu/sign.cpp.
//
// Napkin math: pack reads n * 4 bytes and writes n / 8; with scales it reads x a second
// time (the partials pass), which an L2-resident chunk mostly absorbs.
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/compress.cuh"
#include "kernels/cuda/reduce.cuh"

namespace dtsim::kernels::cuda {

namespace {

// One warp per 32-element word, grid-stride.
__global__ void pack_signs_kernel(const float* __restrict__ x, std::int64_t n, std::uint32_t* __restrict__ words) {
  const int lane = threadIdx.x & 31;
  const std::int64_t W = (n + 31) / 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < W; w += warps) {
    const std::int64_t i = 32 * w + lane;
    const bool neg = i < n && x[i] < 0.0f;
    const std::uint32_t bits = __ballot_sync(0xFFFFFFFFu, neg);
    if (lane == 0) words[w] = bits;
  }
}

__global__ void scales_kernel(float* sums, const std::int64_t* offsets, std::int64_t L, float* scales) {
  for (std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < L;
       s += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t ns = offsets[s + 1] - offsets[s];
    scales[s] = ns > 0 ? __fdiv_rn(sums[s], static_cast<float>(ns)) : 0.0f;
  }
}

__global__ void decode_signs_kernel(const std::uint32_t* __restrict__ words, std::int64_t n,
                                    const std::int64_t* offsets, std::int64_t L, const float* scales, float weight,
                                    bool accumulate, float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float sc = scales ? scales[segment_of(offsets, L, i)] : 1.0f;
    const float v = (words[i >> 5] >> (i & 31)) & 1u ? -sc : sc;
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

__global__ void majority_vote_kernel(const std::uint32_t* const* words, int R, std::int64_t n, float* out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t neg = 0;
    for (int r = 0; r < R; ++r) neg += (words[r][i >> 5] >> (i & 31)) & 1u;
    const std::int64_t sum = R - 2 * neg;
    out[i] = sum > 0 ? 1.0f : (sum < 0 ? -1.0f : 0.0f);
  }
}

}  // namespace

void pack_signs(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                const std::int64_t* slot_begin, std::int64_t slots, std::uint32_t* words, float* scales,
                float* partials, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (n > 0) {
    pack_signs_kernel<<<grid_for((n + 31) / 32 * 32, 256), 256, 0, s>>>(x, n, words);
    DTSIM_CUDA_CHECK(cudaGetLastError());
  }
  if (!scales || L == 0) return;
  chunk_partials(x, n, offsets, L, slot_begin, ChunkOp::abs, partials, s);
  // the per-segment sums land in scales, then become means in place
  fold_partials(partials, slots, slot_begin, L, scales, s);
  scales_kernel<<<grid_for(L, 256), 256, 0, s>>>(scales, offsets, L, scales);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void decode_signs(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                  const float* scales, float weight, bool accumulate, float* out, void* stream) {
  if (n == 0) return;
  decode_signs_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(words, n, offsets, L, scales,
                                                                                      weight, accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void majority_vote(const std::uint32_t* const* words, int R, std::int64_t n, float* out, void* stream) {
  if (n == 0) return;
  majority_vote_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(words, R, n, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dtsim::kernels::cuda
