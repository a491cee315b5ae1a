// CPU sign compression: packed sign bits (bit j of word w is 1 iff element 32w + j is
// negative, x < 0), the per-segment sum of |x| in the canonical order (common.hpp), the
// decoder, and the majority vote. fp32, fp16 and bf16 inputs.
//
// Sign rule: only x < 0 encodes as "negative"; 0, -0 and NaN encode as +1, and every
// set bit decodes to -1, every clear bit to +1, on both sides of the wire.
#pragma once

#include <cstdint>

namespace dtsim::kernels::cpu {

// Packs the signs of x[0..n) into words[0..ceil(n/32)) (padding bits zero). When
// abs_partials is not null, also writes the canonical per-(segment, chunk) partial
// sums of |x| (slot layout from partial_slots) for segments at `offsets` (L + 1 entries).
template <class T>
void pack_signs(const T* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                const std::int64_t* slot_begin, std::uint32_t* words, float* abs_partials);

// Decodes: value_i = (bit_i ? -1 : +1) * (scales ? scales[segment of i] : 1).
// accumulate = false: out_i = value_i; true: out_i = out_i + weight * value_i (in fp32).
template <class T>
void decode_signs(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                  const float* scales, float weight, bool accumulate, T* out);

// Error feedback (fp32) in one pass over the memory m: m_i = m_i + x_i, then the signs
// (and |m| partials) of the new m as pack_signs; with subtract_unit (the unscaled sign)
// also m_i = m_i + (-1) * (bit_i ? -1 : +1), as decode_signs(accumulate, weight -1).
void add_pack_signs(float* m, const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::int64_t* slot_begin, std::uint32_t* words, float* abs_partials, bool subtract_unit);

// out_i = sign(sum_r (bit_{r,i} ? -1 : +1)) in {-1, 0, +1} (a tie gives 0), for R
// packed sign vectors of n elements: bit-sliced counters over 16 words at a time (one
// ripple-carry add of a rank's words per step, R * bit_width(R) word operations per
// 512 elements), compared with R / 2 bit-serially.
void majority_vote(const std::uint32_t* const* words, std::int64_t R, std::int64_t n, float* out);

}  // namespace dtsim::kernels::cpu
