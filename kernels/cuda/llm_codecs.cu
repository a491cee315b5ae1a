// The LLM codecs on the GPU (kernels/llm_codecs.hpp), bit-identical to their CPU kernels
// (cpu/llm_codecs.cpp): the per-element formulas are detail/llm_codecs.hpp's, the maxima are
// taken on integer magnitude keys (any order gives the same), and every floating-point sum
// runs in the CPU's order: one thread per chunk of the int8 codebook's sums and per output
// coefficient of a DCT, one thread per bin or statistic for the folds. Simple kernels first;
// the sequential per-chunk sums leave bandwidth on the table (napkin math: a thread reads
// 4096 consecutive floats, so a warp's loads are 32 strided streams).
//
// Top-k per chunk: a block per chunk holds its keys in shared memory; element i is kept when
// fewer than k elements outrank it (detail::outranks), and its slot is the number of kept
// elements before it: O(E^2 / threads) per chunk.
#include <cuda_runtime.h>

#include "kernels/cpu/llm_codecs.hpp"  // kStatChunk, kBinChunk
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/llm_codecs.cuh"
#include "kernels/detail/llm_codecs.hpp"

namespace dtsim::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxChunk = 4096;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

#define DTSIM_GRID_LOOP(i, n)                                                                   \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// --- fp4 --------------------------------------------------------------------------------------

__global__ void fp4_scales_kernel(const float* __restrict__ x, std::int64_t n, std::int64_t block,
                                  unsigned int* keys) {
  DTSIM_GRID_LOOP(i, n) {
    const unsigned int key = detail::llm_mag_key(x[i]);
    if (key != 0) atomicMax(keys + i / block, key);
  }
}

__global__ void fp4_encode_kernel(const float* __restrict__ x, std::int64_t n, std::int64_t block,
                                  const float* scales, std::uint8_t* __restrict__ codes) {
  DTSIM_GRID_LOOP(p, (n + 1) / 2) {
    std::uint32_t byte = detail::fp4_code(x[2 * p], scales[2 * p / block]);
    if (2 * p + 1 < n) byte |= detail::fp4_code(x[2 * p + 1], scales[(2 * p + 1) / block]) << 4;
    codes[p] = static_cast<std::uint8_t>(byte);
  }
}

__global__ void fp4_decode_kernel(const std::uint8_t* __restrict__ codes, const float* scales, std::int64_t n,
                                  std::int64_t block, float weight, bool accumulate, float* __restrict__ out) {
  DTSIM_GRID_LOOP(i, n) {
    const float v = detail::fp4_value((codes[i / 2] >> (4 * (i % 2))) & 0xFU, scales[i / block]);
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

// --- int8 codebook ----------------------------------------------------------------------------

// partials[c] = the chunk's sum of x (square: of (x - mu)^2), in index order, in double.
__global__ void stat_partials_kernel(const float* __restrict__ x, std::int64_t n, const double* mu_sigma,
                                     bool square, double* partials) {
  const std::int64_t chunks = (n + cpu::kStatChunk - 1) / cpu::kStatChunk;
  DTSIM_GRID_LOOP(c, chunks) {
    const double mu = square ? mu_sigma[0] : 0.0;
    double s = 0.0;
    const std::int64_t end = (c + 1) * cpu::kStatChunk < n ? (c + 1) * cpu::kStatChunk : n;
    for (std::int64_t i = c * cpu::kStatChunk; i < end; ++i) {
      const double d = __dsub_rn(static_cast<double>(x[i]), mu);
      s = __dadd_rn(s, square ? __dmul_rn(d, d) : static_cast<double>(x[i]));
    }
    partials[c] = s;
  }
}

// One thread: the fold in chunk order, then mu (square false) or sigma (true).
__global__ void stat_fold_kernel(const double* partials, std::int64_t n, bool square, double* mu_sigma) {
  const std::int64_t chunks = (n + cpu::kStatChunk - 1) / cpu::kStatChunk;
  double total = 0.0;
  for (std::int64_t c = 0; c < chunks; ++c) total = __dadd_rn(total, partials[c]);
  if (!square)
    mu_sigma[0] = __ddiv_rn(total, static_cast<double>(n));
  else
    mu_sigma[1] = n > 1 ? __dsqrt_rn(__ddiv_rn(total, static_cast<double>(n - 1))) : 0.0;
}

__device__ bool spread_of(const double* mu_sigma) {
  const double mu = mu_sigma[0], sigma = mu_sigma[1];
  return sigma > 0.0 && isfinite(sigma) && isfinite(mu);
}

// One thread per chunk of kBinChunk: its codes, its 256 bin sums and counts.
__global__ void int8_codes_kernel(const float* __restrict__ x, std::int64_t n, const double* mu_sigma,
                                  std::uint8_t* __restrict__ codes, double* bin_sums, std::int64_t* bin_counts) {
  const std::int64_t chunks = (n + cpu::kBinChunk - 1) / cpu::kBinChunk;
  const double mu = mu_sigma[0], sigma = mu_sigma[1];
  const bool spread = spread_of(mu_sigma);
  const double lo = __dsub_rn(mu, __dmul_rn(6.0, sigma)), width = __ddiv_rn(__dmul_rn(12.0, sigma), 256.0);
  DTSIM_GRID_LOOP(c, chunks) {
    double* sums = bin_sums + 256 * c;
    std::int64_t* counts = bin_counts + 256 * c;
    for (int b = 0; b < 256; ++b) {
      sums[b] = 0.0;
      counts[b] = 0;
    }
    const std::int64_t end = (c + 1) * cpu::kBinChunk < n ? (c + 1) * cpu::kBinChunk : n;
    for (std::int64_t i = c * cpu::kBinChunk; i < end; ++i) {
      const std::uint32_t code = spread ? detail::int8_code(x[i], lo, width) : 128U;
      codes[i] = static_cast<std::uint8_t>(code);
      sums[code] = __dadd_rn(sums[code], static_cast<double>(x[i]));
      counts[code] += 1;
    }
  }
}

// One thread per bin: the fold in chunk order and the bin's mean (or centre).
__global__ void int8_codebook_kernel(std::int64_t n, const double* mu_sigma, const double* bin_sums,
                                     const std::int64_t* bin_counts, float* codebook) {
  const std::int64_t chunks = (n + cpu::kBinChunk - 1) / cpu::kBinChunk;
  const double mu = mu_sigma[0], sigma = mu_sigma[1];
  const double lo = __dsub_rn(mu, __dmul_rn(6.0, sigma)), width = __ddiv_rn(__dmul_rn(12.0, sigma), 256.0);
  const int b = threadIdx.x;
  if (b >= 256) return;
  double s = 0.0;
  std::int64_t count = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    s = __dadd_rn(s, bin_sums[256 * c + b]);
    count += bin_counts[256 * c + b];
  }
  codebook[b] = count > 0 ? static_cast<float>(__ddiv_rn(s, static_cast<double>(count)))
                          : static_cast<float>(__dadd_rn(lo, __dmul_rn(static_cast<double>(b) + 0.5, width)));
}

__global__ void int8_decode_kernel(const std::uint8_t* __restrict__ codes, const float* codebook, std::int64_t n,
                                   float weight, bool accumulate, float* __restrict__ out) {
  DTSIM_GRID_LOOP(i, n) {
    const float v = codebook[codes[i]];
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

// --- 2-bit ------------------------------------------------------------------------------------

__global__ void row_max_kernel(const float* __restrict__ v, std::int64_t n, std::int64_t k, unsigned int* keys) {
  DTSIM_GRID_LOOP(i, n) {
    const unsigned int key = detail::llm_mag_key(v[i]);
    if (key != 0) atomicMax(keys + i / k, key);
  }
}

__global__ void two_bit_encode_kernel(const float* __restrict__ v, std::int64_t n, std::int64_t k,
                                      const float* scales, std::uint8_t* __restrict__ codes) {
  DTSIM_GRID_LOOP(b, (n + 3) / 4) {
    std::uint32_t byte = 0;
    for (std::int64_t j = 4 * b; j < n && j < 4 * b + 4; ++j)
      byte |= detail::two_bit_code(v[j], scales[j / k]) << (2 * (j % 4));
    codes[b] = static_cast<std::uint8_t>(byte);
  }
}

__global__ void two_bit_decode_kernel(const std::uint8_t* __restrict__ codes, const float* scales, std::int64_t n,
                                      std::int64_t k, float* __restrict__ out) {
  DTSIM_GRID_LOOP(i, n) out[i] = detail::two_bit_value((codes[i / 4] >> (2 * (i % 4))) & 3U, scales[i / k]);
}

// --- DCT and top-k per chunk ------------------------------------------------------------------

// Pass 1 of a chunk transform, one thread per element of the intermediate t (see the CPU's
// loops: forward rows, or inverse columns).
__global__ void dct_pass1_kernel(const float* dr, const float* dc, const float* __restrict__ in, std::int64_t count,
                                 std::int64_t tr, std::int64_t tc, bool inverse, float* __restrict__ t) {
  const std::int64_t E = tr * tc;
  DTSIM_GRID_LOOP(e, count * E) {
    const std::int64_t c = e / E, a = (e % E) / tc, q = e % tc;
    const float* x = in + c * E;
    t[e] = inverse ? detail::strided_dot(dr + a, tr, x + q, tc, tr) : detail::strided_dot(dc + q * tc, 1, x + a * tc, 1, tc);
  }
}

__global__ void dct_pass2_kernel(const float* dr, const float* dc, const float* __restrict__ t, std::int64_t count,
                                 std::int64_t tr, std::int64_t tc, bool inverse, float* __restrict__ out) {
  const std::int64_t E = tr * tc;
  DTSIM_GRID_LOOP(e, count * E) {
    const std::int64_t c = e / E, a = (e % E) / tc, q = e % tc;
    const float* tt = t + c * E;
    out[e] = inverse ? detail::strided_dot(dc + q, tc, tt + a * tc, 1, tc) : detail::strided_dot(dr + a * tr, 1, tt + q, tc, tr);
  }
}

__global__ void topk_kernel(const float* __restrict__ in, std::int64_t E, std::int64_t k, std::int32_t* indices,
                            float* values) {
  __shared__ unsigned int keys[kMaxChunk];
  __shared__ unsigned char kept[kMaxChunk];
  const std::int64_t c = blockIdx.x;
  const float* x = in + c * E;
  for (std::int64_t i = threadIdx.x; i < E; i += blockDim.x) keys[i] = detail::llm_mag_key(x[i]);
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < E; i += blockDim.x) {
    std::int64_t above = 0;
    for (std::int64_t j = 0; j < E && above < k; ++j) above += detail::outranks(keys[j], j, keys[i], i) ? 1 : 0;
    kept[i] = above < k ? 1 : 0;
  }
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < E; i += blockDim.x) {
    if (!kept[i]) continue;
    std::int64_t slot = 0;
    for (std::int64_t j = 0; j < i; ++j) slot += kept[j];
    indices[c * k + slot] = static_cast<std::int32_t>(i);
    values[c * k + slot] = x[i];
  }
}

__global__ void pack_kernel(const std::int32_t* indices, std::int64_t count, std::int32_t bits,
                            std::uint32_t* words) {
  DTSIM_GRID_LOOP(w, (count * bits + 31) / 32) words[w] = detail::packed_word(indices, count, bits, w);
}

__global__ void unpack_kernel(const std::uint32_t* words, std::int64_t count, std::int32_t bits,
                              std::int32_t* indices) {
  DTSIM_GRID_LOOP(q, count) indices[q] = detail::unpacked_index(words, bits, q);
}

__global__ void scatter_kernel(const std::int32_t* indices, const float* values, std::int64_t count, std::int64_t E,
                               std::int64_t k, float* dense) {
  DTSIM_GRID_LOOP(q, count * k) dense[(q / k) * E + indices[q]] = values[q];
}

}  // namespace

void fp4_scales(const float* x, std::int64_t n, std::int64_t block, float* scales, void* stream) {
  const std::int64_t blocks = (n + block - 1) / block;
  if (blocks == 0) return;
  DTSIM_CUDA_CHECK(cudaMemsetAsync(scales, 0, static_cast<std::size_t>(blocks) * 4, as_stream(stream)));
  // The keys are the scales' bits: an unsigned maximum of |x|'s bit patterns is |x|'s maximum.
  fp4_scales_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(x, n, block,
                                                                               reinterpret_cast<unsigned int*>(scales));
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void fp4_encode(const float* x, std::int64_t n, std::int64_t block, const float* scales, std::uint8_t* codes,
                void* stream) {
  if (n == 0) return;
  fp4_encode_kernel<<<grid_for((n + 1) / 2, kThreads), kThreads, 0, as_stream(stream)>>>(x, n, block, scales, codes);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void fp4_decode(const std::uint8_t* codes, const float* scales, std::int64_t n, std::int64_t block, float weight,
                bool accumulate, float* out, void* stream) {
  if (n == 0) return;
  fp4_decode_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(codes, scales, n, block, weight,
                                                                               accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void int8_stats(const float* x, std::int64_t n, double* partials, double* mu_sigma, void* stream) {
  const std::int64_t chunks = (n + cpu::kStatChunk - 1) / cpu::kStatChunk;
  for (bool square : {false, true}) {
    stat_partials_kernel<<<grid_for(chunks, kThreads), kThreads, 0, as_stream(stream)>>>(x, n, mu_sigma, square,
                                                                                        partials);
    DTSIM_CUDA_CHECK(cudaGetLastError());
    stat_fold_kernel<<<1, 1, 0, as_stream(stream)>>>(partials, n, square, mu_sigma);
    DTSIM_CUDA_CHECK(cudaGetLastError());
  }
}

void int8_encode(const float* x, std::int64_t n, const double* mu_sigma, std::uint8_t* codes, double* bin_sums,
                 std::int64_t* bin_counts, float* codebook, void* stream) {
  const std::int64_t chunks = (n + cpu::kBinChunk - 1) / cpu::kBinChunk;
  int8_codes_kernel<<<grid_for(chunks, 64), 64, 0, as_stream(stream)>>>(x, n, mu_sigma, codes, bin_sums, bin_counts);
  DTSIM_CUDA_CHECK(cudaGetLastError());
  int8_codebook_kernel<<<1, 256, 0, as_stream(stream)>>>(n, mu_sigma, bin_sums, bin_counts, codebook);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void int8_decode(const std::uint8_t* codes, const float* codebook, std::int64_t n, float weight, bool accumulate,
                 float* out, void* stream) {
  if (n == 0) return;
  int8_decode_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(codes, codebook, n, weight, accumulate,
                                                                                out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void two_bit_encode(const float* values, std::int64_t rows, std::int64_t k, float* scales, std::uint8_t* codes,
                    void* stream) {
  const std::int64_t n = rows * k;
  if (n == 0) return;
  DTSIM_CUDA_CHECK(cudaMemsetAsync(scales, 0, static_cast<std::size_t>(rows) * 4, as_stream(stream)));
  row_max_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(values, n, k,
                                                                            reinterpret_cast<unsigned int*>(scales));
  DTSIM_CUDA_CHECK(cudaGetLastError());
  two_bit_encode_kernel<<<grid_for((n + 3) / 4, kThreads), kThreads, 0, as_stream(stream)>>>(values, n, k, scales,
                                                                                             codes);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void two_bit_decode(const std::uint8_t* codes, const float* scales, std::int64_t rows, std::int64_t k, float* out,
                    void* stream) {
  const std::int64_t n = rows * k;
  if (n == 0) return;
  two_bit_decode_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(codes, scales, n, k, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void dct_chunks(const float* dr, const float* dc, const float* in, std::int64_t count, std::int64_t tr,
                std::int64_t tc, bool inverse, float* scratch, float* out, void* stream) {
  const std::int64_t n = count * tr * tc;
  if (n == 0) return;
  dct_pass1_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(dr, dc, in, count, tr, tc, inverse,
                                                                              scratch);
  DTSIM_CUDA_CHECK(cudaGetLastError());
  dct_pass2_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(dr, dc, scratch, count, tr, tc, inverse,
                                                                              out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void topk_chunks(const float* in, std::int64_t count, std::int64_t E, std::int64_t k, std::int32_t* indices,
                 float* values, void* stream) {
  for (std::int64_t c0 = 0; c0 < count; c0 += 65535) {  // the grid's x limit
    const std::int64_t c = count - c0 < 65535 ? count - c0 : 65535;
    topk_kernel<<<static_cast<unsigned int>(c), kThreads, 0, as_stream(stream)>>>(in + c0 * E, E, k, indices + c0 * k,
                                                                                  values + c0 * k);
    DTSIM_CUDA_CHECK(cudaGetLastError());
  }
}

void pack_indices(const std::int32_t* indices, std::int64_t count, std::int32_t bits, std::uint32_t* words,
                  void* stream) {
  const std::int64_t n = (count * bits + 31) / 32;
  if (n == 0) return;
  pack_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(indices, count, bits, words);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void unpack_indices(const std::uint32_t* words, std::int64_t count, std::int32_t bits, std::int32_t* indices,
                    void* stream) {
  if (count == 0) return;
  unpack_kernel<<<grid_for(count, kThreads), kThreads, 0, as_stream(stream)>>>(words, count, bits, indices);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void scatter_chunks(const std::int32_t* indices, const float* values, std::int64_t count, std::int64_t E,
                    std::int64_t k, float* dense, void* stream) {
  if (count * k == 0) return;
  scatter_kernel<<<grid_for(count * k, kThreads), kThreads, 0, as_stream(stream)>>>(indices, values, count, E, k,
                                                                                    dense);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dtsim::kernels::cuda
