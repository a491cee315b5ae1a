// The CUDA twins of kernels/cpu/llm_codecs.hpp: the same arguments on device pointers (plus
// the stream, a cudaStream_t passed as void*), the same bytes. Scratch arrays are the
// caller's device memory, sized as the CPU functions say.
#pragma once

#include <cstdint>

namespace dtsim::kernels::cuda {

void fp4_scales(const float* x, std::int64_t n, std::int64_t block, float* scales, void* stream);
void fp4_encode(const float* x, std::int64_t n, std::int64_t block, const float* scales, std::uint8_t* codes,
                void* stream);
void fp4_decode(const std::uint8_t* codes, const float* scales, std::int64_t n, std::int64_t block, float weight,
                bool accumulate, float* out, void* stream);

// mu_sigma: 2 doubles of device memory; partials: ceil(n / 4096) doubles.
void int8_stats(const float* x, std::int64_t n, double* partials, double* mu_sigma, void* stream);
void int8_encode(const float* x, std::int64_t n, const double* mu_sigma, std::uint8_t* codes, double* bin_sums,
                 std::int64_t* bin_counts, float* codebook, void* stream);
void int8_decode(const std::uint8_t* codes, const float* codebook, std::int64_t n, float weight, bool accumulate,
                 float* out, void* stream);

void two_bit_encode(const float* values, std::int64_t rows, std::int64_t k, float* scales, std::uint8_t* codes,
                    void* stream);
void two_bit_decode(const std::uint8_t* codes, const float* scales, std::int64_t rows, std::int64_t k, float* out,
                    void* stream);

void dct_chunks(const float* dr, const float* dc, const float* in, std::int64_t count, std::int64_t tr,
                std::int64_t tc, bool inverse, float* scratch, float* out, void* stream);
// E <= 4096 (one chunk's keys in a block's shared memory).
void topk_chunks(const float* in, std::int64_t count, std::int64_t E, std::int64_t k, std::int32_t* indices,
                 float* values, void* stream);
void pack_indices(const std::int32_t* indices, std::int64_t count, std::int32_t bits, std::uint32_t* words,
                  void* stream);
void unpack_indices(const std::uint32_t* words, std::int64_t count, std::int32_t bits, std::int32_t* indices,
                    void* stream);
void scatter_chunks(const std::int32_t* indices, const float* values, std::int64_t count, std::int64_t E,
                    std::int64_t k, float* dense, void* stream);

}  // namespace dtsim::kernels::cuda
