// CPU fp32 <-> fp16 / bf16 casts (the half-precision all-reduce's wire format).
// Rounding is to nearest, ties to even; overflow gives +-Inf; subnormals are kept.
// NaN policy (as c10::Half / c10::BFloat16 do, so torch's .to() is the oracle):
// fp16 NaN = 0x7E00 with the input's sign bit, bf16 NaN = 0x7FC0.
#pragma once

#include <cstdint>

namespace dtsim::kernels::cpu {

void float_to_half(const float* x, std::int64_t n, std::uint16_t* out);
void float_to_bfloat16(const float* x, std::int64_t n, std::uint16_t* out);

// accumulate = false: out_i = float(h_i); true: out_i = out_i + weight * float(h_i).
void half_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out);
void bfloat16_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out);

// Error feedback in one pass: m_i = m_i + x_i; h_i = cast(m_i); m_i = m_i + (-1) * float(h_i)
// (the decoder's formula with weight -1).
void add_float_to_half_feedback(float* m, const float* x, std::int64_t n, std::uint16_t* h);
void add_float_to_bfloat16_feedback(float* m, const float* x, std::int64_t n, std::uint16_t* h);

}  // namespace dtsim::kernels::cpu
