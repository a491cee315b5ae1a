// QSGD on the GPU, bit-identical to kernels/cpu/qsgd.cpp: the norms by the canonical
// reduction (reduce.cuh), then one thread per 64-element block computing its codes with
// the shared counter-based uniforms (kernels/detail/hash.hpp) and packing them into
// `bits` 64-bit words; the decoder is one thread per element.
//
// Napkin math: two reads of x (norm, encode), n * bits / 8 bytes written.
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/compress.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels::cuda {

namespace {

constexpr std::int64_t kBlock = 64;

__host__ __device__ int code_bits(int levels) {
  int w = 0;
  for (unsigned v = static_cast<unsigned>(levels); v; v >>= 1) ++w;
  return 1 + w;
}

__global__ void norms_kernel(float* sums, std::int64_t L, const double* tau_denominator, float* norms,
                             float* wire_norms) {
  for (std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < L;
       s += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float norm = __fsqrt_rn(sums[s]);
    norms[s] = norm;
    wire_norms[s] = tau_denominator ? static_cast<float>(__ddiv_rn(static_cast<double>(norm), tau_denominator[s])) : norm;
  }
}

__global__ void encode_kernel(const float* __restrict__ x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                              const float* norms, const std::uint64_t* keys, int levels, int bits,
                              std::uint32_t* __restrict__ words) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  const std::int64_t total_words = (n * bits + 31) / 32;
  const std::uint32_t signbit = 1u << (bits - 1);
  for (std::int64_t blk = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; blk < blocks;
       blk += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t base = blk * kBlock;
    std::int64_t seg = segment_of(offsets, L, base);
    std::uint64_t acc = 0;
    int fill = 0;
    std::int64_t w = 2 * bits * blk;  // 32-bit word index
    for (int j = 0; j < kBlock; ++j) {
      const std::int64_t i = base + j;
      std::uint32_t code = 0;
      if (i < n) {
        while (offsets[seg + 1] <= i) ++seg;
        const float norm = norms[seg];
        if (norm > 0.0f && isfinite(norm)) {
          const float inv = __fdiv_rn(static_cast<float>(levels), norm);
          const float v = x[i];
          const float y = __fmul_rn(fabsf(v), inv);
          const float fl = floorf(y);
          const float u = detail::uniform24(keys[seg], static_cast<std::uint32_t>(i - offsets[seg]));
          std::uint32_t level = static_cast<std::uint32_t>(fl) + (u < __fsub_rn(y, fl) ? 1u : 0u);
          if (level > static_cast<std::uint32_t>(levels)) level = static_cast<std::uint32_t>(levels);
          code = level | ((v < 0.0f && level > 0) ? signbit : 0u);
        }
      }
      const std::uint64_t c = code;
      acc |= c << fill;
      fill += bits;
      if (fill >= 64) {
        if (w < total_words) words[w] = static_cast<std::uint32_t>(acc);
        if (w + 1 < total_words) words[w + 1] = static_cast<std::uint32_t>(acc >> 32);
        w += 2;
        fill -= 64;
        acc = fill > 0 ? c >> (bits - fill) : 0;
      }
    }
  }
}

__global__ void decode_kernel(const std::uint32_t* __restrict__ words, std::int64_t n, const std::int64_t* offsets,
                              std::int64_t L, const float* wire_norms, int levels, int bits, float weight,
                              bool accumulate, float* __restrict__ out) {
  const std::int64_t total_words = (n * bits + 31) / 32;
  const std::uint32_t lmask = (1u << (bits - 1)) - 1u;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t bit = i * bits;
    const std::int64_t w = bit >> 5;
    const int sh = static_cast<int>(bit & 31);
    std::uint64_t pair = words[w];
    if (w + 1 < total_words) pair |= static_cast<std::uint64_t>(words[w + 1]) << 32;
    const std::uint32_t code = static_cast<std::uint32_t>(pair >> sh);
    const std::int64_t seg = segment_of(offsets, L, i);
    const float unit = __fdiv_rn(wire_norms[seg], static_cast<float>(levels));
    const float mag = __fmul_rn(static_cast<float>(code & lmask), unit);
    const float v = (code >> (bits - 1)) & 1u ? -mag : mag;
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

}  // namespace

void qsgd_encode(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                 const std::int64_t* slot_begin, std::int64_t slots, const std::uint64_t* keys, int levels,
                 const double* tau_denominator, float* partials, float* norms, float* wire_norms,
                 std::uint32_t* words, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (L == 0) return;
  chunk_partials(x, n, offsets, L, slot_begin, ChunkOp::square, partials, s);
  fold_partials(partials, slots, slot_begin, L, norms, s);
  norms_kernel<<<grid_for(L, 256), 256, 0, s>>>(norms, L, tau_denominator, norms, wire_norms);
  DTSIM_CUDA_CHECK(cudaGetLastError());
  if (n == 0) return;
  const int bits = code_bits(levels);
  encode_kernel<<<grid_for((n + kBlock - 1) / kBlock, 128), 128, 0, s>>>(x, n, offsets, L, norms, keys, levels, bits,
                                                                         words);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void qsgd_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                 const float* wire_norms, int levels, float weight, bool accumulate, float* out, void* stream) {
  if (n == 0) return;
  decode_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      words, n, offsets, L, wire_norms, levels, code_bits(levels), weight, accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dtsim::kernels::cuda
