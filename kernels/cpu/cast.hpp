// CPU fp32 <-> fp16 / bf16 casts (the half-precision all-reduce's wire format).
// Rounding is to nearest, ties to even; overflow gives +-Inf; subnormals are kept.
// NaN policy (as c10::Half / c10::BFloat16 do, so torch's .to() is the oracle):
// fp16 NaN = 0x7E00 with the input's sign bit, bf16 NaN = 0x7FC0.
#pragma once

#include <cstdint>

namespace dtsim::kernels::cpu {

// How a cast writes a fresh output (a payload, a decoded buffer). `streaming`: with
// non-temporal stores, which skip the read of each destination line that a store through
// the cache costs first (the output is 1/2 of the input's bytes for a cast to 16 bits:
// that read is a third of the traffic), and leave the output in memory, not in the cache.
// `automatic` streams outputs of at least kStreamMinBytes: below, the output may still be
// in the cache when it is sent or read, and the write-allocate is cheap (the output's lines
// are often cached already); above, they fall out of this machine's share of the LLC
// anyway (measured crossover: 16-32 MB of fp32 input, bench/results/kernels-cpu.md).
// Only the AVX2 and AVX-512 paths stream; the bytes are the same either way.
enum class Store { automatic, cached, streaming };
inline constexpr std::int64_t kStreamMinBytes = std::int64_t{16} << 20;

void float_to_half(const float* x, std::int64_t n, std::uint16_t* out, Store store = Store::automatic);
void float_to_bfloat16(const float* x, std::int64_t n, std::uint16_t* out, Store store = Store::automatic);

// accumulate = false: out_i = float(h_i); true: out_i = out_i + weight * float(h_i) (read
// and written in place: `store` applies to accumulate = false only).
void half_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out,
                   Store store = Store::automatic);
void bfloat16_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out,
                       Store store = Store::automatic);

// Error feedback in one pass: m_i = m_i + x_i; h_i = cast(m_i); m_i = m_i + (-1) * float(h_i)
// (the decoder's formula with weight -1). `store` is for h.
void add_float_to_half_feedback(float* m, const float* x, std::int64_t n, std::uint16_t* h,
                                Store store = Store::automatic);
void add_float_to_bfloat16_feedback(float* m, const float* x, std::int64_t n, std::uint16_t* h,
                                    Store store = Store::automatic);

}  // namespace dtsim::kernels::cpu
