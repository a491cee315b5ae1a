// one_bit, terngrad and natural compression on the GPU, bit-identical to their CPU codecs
// (kernels/codecs/one_bit.cpp, terngrad.cpp, natural.cpp): the per-element formulas are
// the shared lines of kernels/detail/quantizers.hpp, the draws hash.hpp's, one_bit's side
// sums the canonical reduction (reduce.cuh), and the counts and maxima integers, which
// any order of reduction gives alike. Simple kernels: one thread per element or per
// packed word.
//
// Napkin math: one_bit reads x three times (signs, then each side's sum) and writes n / 8
// bytes; terngrad reads it twice (max, codes) and writes n / 4; natural reads it once and
// writes 9n / 8.
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/compress.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/detail/hash.hpp"
#include "kernels/detail/quantizers.hpp"

namespace dtsim::kernels::cuda {

namespace {

// --- one_bit ---------------------------------------------------------------------------

// counts[s] += the set sign bits of piece s (counts zeroed by the caller): a block per
// piece, its threads over the piece's words.
__global__ void count_negatives_kernel(const std::uint32_t* __restrict__ words, const std::int64_t* offsets,
                                       std::int64_t L, unsigned long long* counts) {
  for (std::int64_t s = blockIdx.x; s < L; s += gridDim.x) {
    const std::int64_t a = offsets[s], b = offsets[s + 1];
    unsigned long long count = 0;
    for (std::int64_t w = a / 32 + threadIdx.x; 32 * w < b; w += blockDim.x) {
      const std::int64_t lo = (a > 32 * w ? a : 32 * w) - 32 * w, hi = (b < 32 * w + 32 ? b : 32 * w + 32) - 32 * w;
      std::uint32_t bits = words[w] >> lo;
      if (hi - lo < 32) bits &= (1U << (hi - lo)) - 1U;
      count += static_cast<unsigned long long>(__popc(bits));
    }
    if (count != 0) atomicAdd(counts + s, count);
  }
}

// means[s] (the sum of piece s's x >= 0) and means[L + s] (of its x < 0) become the means.
__global__ void one_bit_means_kernel(const std::int64_t* offsets, std::int64_t L, const unsigned long long* counts,
                                     float* means) {
  for (std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < L;
       s += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const auto negatives = static_cast<std::int64_t>(counts[s]);
    means[s] = detail::one_bit_mean(means[s], offsets[s + 1] - offsets[s] - negatives);
    means[L + s] = detail::one_bit_mean(means[L + s], negatives);
  }
}

__global__ void one_bit_decode_kernel(const std::uint32_t* __restrict__ words, std::int64_t n,
                                      const std::int64_t* offsets, std::int64_t L, const float* means, float weight,
                                      bool accumulate, float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t s = segment_of(offsets, L, i);
    const float v = (words[i >> 5] >> (i & 31)) & 1U ? means[L + s] : means[s];
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

// --- terngrad --------------------------------------------------------------------------

constexpr std::int64_t kRun = 32;  // elements per thread in the max pass

// max_keys[s] = max over piece s of the magnitude keys (zeroed by the caller): each
// thread takes a run of kRun elements and sends one atomicMax per piece it meets.
__global__ void piece_max_kernel(const float* __restrict__ x, std::int64_t n, const std::int64_t* offsets,
                                 std::int64_t L, unsigned int* max_keys) {
  const std::int64_t runs = (n + kRun - 1) / kRun;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < runs;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i0 = r * kRun, i1 = i0 + kRun < n ? i0 + kRun : n;
    std::int64_t s = segment_of(offsets, L, i0);
    unsigned int m = 0;
    for (std::int64_t i = i0; i < i1; ++i) {
      while (offsets[s + 1] <= i) {
        if (m != 0) atomicMax(max_keys + s, m);
        m = 0;
        ++s;
      }
      const unsigned int key = mag_key(x[i]);
      m = key > m ? key : m;
    }
    if (m != 0) atomicMax(max_keys + s, m);
  }
}

// One thread per word of 16 codes.
__global__ void terngrad_encode_kernel(const float* __restrict__ x, std::int64_t n, const std::int64_t* offsets,
                                       std::int64_t L, const std::uint64_t* keys, const float* scales,
                                       std::uint32_t* __restrict__ words) {
  const std::int64_t W = (n + 15) / 16;
  for (std::int64_t w = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < W;
       w += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t s = segment_of(offsets, L, 16 * w);
    std::uint32_t word = 0;
    for (int j = 0; j < 16 && 16 * w + j < n; ++j) {
      const std::int64_t i = 16 * w + j;
      while (offsets[s + 1] <= i) ++s;
      const float u = detail::uniform24(keys[s], static_cast<std::uint32_t>(i - offsets[s]));
      word |= detail::terngrad_code(x[i], scales[s], u) << (2 * j);
    }
    words[w] = word;
  }
}

__global__ void terngrad_decode_kernel(const std::uint32_t* __restrict__ words, std::int64_t n,
                                       const std::int64_t* offsets, std::int64_t L, const float* scales, float weight,
                                       bool accumulate, float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t code = (words[i >> 4] >> (2 * (i & 15))) & 3U;
    const float v = detail::terngrad_value(code, scales[segment_of(offsets, L, i)]);
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

// --- natural ---------------------------------------------------------------------------

// One warp per word of 32 sign bits (the ballot packs them); each lane writes its
// element's exponent byte.
__global__ void natural_encode_kernel(const float* __restrict__ x, std::int64_t n, const std::int64_t* offsets,
                                      std::int64_t L, const std::uint64_t* keys, std::uint32_t* __restrict__ words,
                                      std::uint8_t* __restrict__ exponents) {
  const int lane = threadIdx.x & 31;
  const std::int64_t W = (n + 31) / 32;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < W; w += warps) {
    const std::int64_t i = 32 * w + lane;
    bool negative = false;
    if (i < n) {
      const std::int64_t s = segment_of(offsets, L, i);
      const float u = detail::uniform24(keys[s], static_cast<std::uint32_t>(i - offsets[s]));
      const detail::NaturalCode code = detail::natural_code(x[i], u);
      negative = code.negative != 0;
      exponents[i] = static_cast<std::uint8_t>(code.exponent);
    }
    const std::uint32_t bits = __ballot_sync(0xFFFFFFFFU, negative);
    if (lane == 0) words[w] = bits;
  }
}

__global__ void natural_decode_kernel(const std::uint32_t* __restrict__ words, const std::uint8_t* __restrict__ exponents,
                                      std::int64_t n, float weight, bool accumulate, float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = detail::natural_value((words[i >> 5] >> (i & 31)) & 1U, exponents[i]);
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

}  // namespace

void one_bit_encode(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::int64_t* slot_begin, std::int64_t slots, float* partials, unsigned long long* counts,
                    float* means, std::uint32_t* words, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  pack_signs(x, n, offsets, L, slot_begin, slots, words, nullptr, partials, stream);
  if (L == 0) return;
  chunk_partials(x, n, offsets, L, slot_begin, ChunkOp::non_negative_part, partials, s);
  fold_partials(partials, slots, slot_begin, L, means, s);
  chunk_partials(x, n, offsets, L, slot_begin, ChunkOp::negative_part, partials, s);
  fold_partials(partials, slots, slot_begin, L, means + L, s);
  DTSIM_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<std::size_t>(8 * L), s));
  if (n > 0) {
    count_negatives_kernel<<<static_cast<int>(L < 4096 ? L : 4096), 256, 0, s>>>(words, offsets, L, counts);
    DTSIM_CUDA_CHECK(cudaGetLastError());
  }
  one_bit_means_kernel<<<grid_for(L, 256), 256, 0, s>>>(offsets, L, counts, means);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void one_bit_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const float* means, float weight, bool accumulate, float* out, void* stream) {
  if (n == 0) return;
  one_bit_decode_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(words, n, offsets, L, means,
                                                                                        weight, accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void terngrad_encode(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                     const std::uint64_t* keys, float* scales, std::uint32_t* words, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (L == 0) return;
  // The scales are the maxima's keys: a magnitude key is the float's own bits.
  DTSIM_CUDA_CHECK(cudaMemsetAsync(scales, 0, static_cast<std::size_t>(4 * L), s));
  if (n == 0) return;
  piece_max_kernel<<<grid_for((n + kRun - 1) / kRun, 256), 256, 0, s>>>(x, n, offsets, L,
                                                                        reinterpret_cast<unsigned int*>(scales));
  DTSIM_CUDA_CHECK(cudaGetLastError());
  terngrad_encode_kernel<<<grid_for((n + 15) / 16, 256), 256, 0, s>>>(x, n, offsets, L, keys, scales, words);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void terngrad_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                     const float* scales, float weight, bool accumulate, float* out, void* stream) {
  if (n == 0) return;
  terngrad_decode_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(words, n, offsets, L, scales,
                                                                                         weight, accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void natural_encode(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::uint64_t* keys, std::uint32_t* words, std::uint8_t* exponents, void* stream) {
  if (n == 0) return;
  natural_encode_kernel<<<grid_for((n + 31) / 32 * 32, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      x, n, offsets, L, keys, words, exponents);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void natural_decode(const std::uint32_t* words, const std::uint8_t* exponents, std::int64_t n, float weight,
                    bool accumulate, float* out, void* stream) {
  if (n == 0) return;
  natural_decode_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(words, exponents, n, weight,
                                                                                        accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dtsim::kernels::cuda
