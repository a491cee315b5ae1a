// The CPU kernels of kernels/llm_codecs.hpp on raw pointers (plain loops, parallel over
// blocks / chunks with at::parallel_for): the oracle of cuda/llm_codecs.cu, whose functions
// have the same arguments and produce the same bytes.
#pragma once

#include <cstdint>

namespace dtsim::kernels::cpu {

// Elements a chunk of the int8 codebook's sums covers (its mean and variance: kStatChunk; its
// bin sums: kBinChunk), in index order within a chunk, chunks' partials folded in order.
constexpr std::int64_t kStatChunk = 4096;
constexpr std::int64_t kBinChunk = 65536;

// scales[b] = max |x| over block b (NaN if the block holds one).
void fp4_scales(const float* x, std::int64_t n, std::int64_t block, float* scales);
void fp4_encode(const float* x, std::int64_t n, std::int64_t block, const float* scales, std::uint8_t* codes);
void fp4_decode(const std::uint8_t* codes, const float* scales, std::int64_t n, std::int64_t block, float weight,
                bool accumulate, float* out);

// mu_sigma[0] = mean, mu_sigma[1] = unbiased standard deviation; partials: ceil(n / kStatChunk)
// doubles of scratch.
void int8_stats(const float* x, std::int64_t n, double* partials, double* mu_sigma);
// codes and the codebook; bin_sums / bin_counts: 256 ceil(n / kBinChunk) of scratch each.
void int8_encode(const float* x, std::int64_t n, const double* mu_sigma, std::uint8_t* codes, double* bin_sums,
                 std::int64_t* bin_counts, float* codebook);
void int8_decode(const std::uint8_t* codes, const float* codebook, std::int64_t n, float weight, bool accumulate,
                 float* out);

void two_bit_encode(const float* values, std::int64_t rows, std::int64_t k, float* scales, std::uint8_t* codes);
void two_bit_decode(const std::uint8_t* codes, const float* scales, std::int64_t rows, std::int64_t k, float* out);

// Each of `count` chunks of tr x tc (row-major) through the DCT-II matrices dr (tr x tr) and
// dc (tc x tc): out = Dr X Dc^T, or with `inverse` X = Dr^T Y Dc. scratch: count tr tc floats.
void dct_chunks(const float* dr, const float* dc, const float* in, std::int64_t count, std::int64_t tr,
                std::int64_t tc, bool inverse, float* scratch, float* out);
// The k largest magnitudes of each of `count` chunks of E elements: their indices (ascending)
// and values.
void topk_chunks(const float* in, std::int64_t count, std::int64_t E, std::int64_t k, std::int32_t* indices,
                 float* values);
void pack_indices(const std::int32_t* indices, std::int64_t count, std::int32_t bits, std::uint32_t* words);
void unpack_indices(const std::uint32_t* words, std::int64_t count, std::int32_t bits, std::int32_t* indices);
// dense [count, E] (zeroed by the caller) gets the values at their indices.
void scatter_chunks(const std::int32_t* indices, const float* values, std::int64_t count, std::int64_t E,
                    std::int64_t k, float* dense);

}  // namespace dtsim::kernels::cpu
