// The per-element formulas of the low-communication LLM codecs (kernels/llm_codecs.hpp),
// shared line for line by their CPU kernels (cpu/llm_codecs.cpp) and CUDA kernels
// (cuda/llm_codecs.cu), so both devices do the same IEEE operations in the same order and
// give the same bytes (built without FMA contraction on both: -ffp-contract=off and
// --fmad=false). C++17, no libm: nvcc compiles it too.
#pragma once

#include <cstdint>

#include "kernels/detail/quantizers.hpp"  // DTSIM_HD, float_bits, bits_float, magnitude

namespace dtsim::kernels::detail {

// A magnitude key: |v|'s bits, NaN above +Inf (cpu::mag_key's order).
DTSIM_HD std::uint32_t llm_mag_key(float v) { return float_bits(v) & 0x7FFFFFFFU; }

// --- FP4 E3M0 ------------------------------------------------------------------------------
// A nibble: bit 3 the sign, bits 0-2 the exponent code e. With the block's scale s
// (max |x|), e = 0 is 0 and e = 1..7 is s 2^(e - 7): the levels s/64, s/32, ..., s/2, s.
// Encoding rounds r = |x| / s to the nearest level (ties to the larger): r = m 2^k with m in
// [1, 2) rounds up to 2^(k+1) when m >= 1.5 (the top mantissa bit); below the smallest
// level, r >= 2^-7 (half of 2^-6) rounds up to it and r < 2^-7 to 0. The sign of 0 is
// dropped. A block whose scale is 0 encodes 0s; one whose scale is not finite (it holds
// Inf or NaN) encodes 0s and decodes to NaN everywhere (0 times the scale).
DTSIM_HD std::uint32_t fp4_code(float v, float scale) {
  if (!(scale > 0.0f) || !is_finite(scale)) return 0;
  const float r = magnitude(v) / scale;  // in [0, 1]
  const std::uint32_t bits = float_bits(r);
  const std::int32_t k = static_cast<std::int32_t>((bits >> 23) & 0xFFU) - 127;  // r = m 2^k (subnormals: tiny)
  std::int32_t e;
  if (k < -7) e = 0;
  else if (k == -7) e = 1;
  else e = k + 7 + ((bits & 0x400000U) ? 1 : 0);
  if (e > 7) e = 7;  // r = 1 exactly (k = 0) or rounding of |x| / s above 1
  if (e == 0) return 0;
  const std::uint32_t negative = float_bits(v) >> 31;
  return (negative << 3) | static_cast<std::uint32_t>(e);
}

DTSIM_HD float fp4_value(std::uint32_t nibble, float scale) {
  const std::uint32_t e = nibble & 7U;
  // 2^(e - 7) exactly, from its exponent field; e = 0 gives 0 (times the scale: NaN for a
  // non-finite scale).
  const float level = e == 0 ? 0.0f : bits_float((e + 120U) << 23);
  const float v = level * scale;
  return (nibble & 8U) ? -v : v;
}

// --- INTELLECT-1's int8 codebook --------------------------------------------------------------
// Bin c of 256 covers [lo + c w, lo + (c + 1) w), lo = mu - 6 sigma, w = 12 sigma / 256; values
// outside [mu - 6 sigma, mu + 6 sigma) go to the end bins. In double: t = (x - lo) / w.
DTSIM_HD std::uint32_t int8_code(float v, double lo, double width) {
  const double t = (static_cast<double>(v) - lo) / width;
  if (!(t >= 0.0)) return 0;  // below the range (NaN cannot reach here: see llm_codecs.hpp)
  if (t >= 256.0) return 255;
  return static_cast<std::uint32_t>(t);
}

// --- 2-bit values (SparseLoCo's Q2) ------------------------------------------------------------
// Per row of scale M = max |v|: the levels -M, -M/3, +M/3, +M (codes 0..3, uniform over
// [-M, M]); nearest level, ties to the larger code: u = (v / M + 1) 1.5, code = floor(u + 0.5)
// clamped to [0, 3]. A row whose scale is 0 or not finite encodes code 2 (+M/3: 0, or a
// non-finite value).
DTSIM_HD std::uint32_t two_bit_code(float v, float scale) {
  if (!(scale > 0.0f) || !is_finite(scale)) return 2;
  const float u = (v / scale + 1.0f) * 1.5f + 0.5f;
  if (!(u >= 1.0f)) return 0;
  if (u >= 3.0f) return 3;
  return static_cast<std::uint32_t>(u);
}

DTSIM_HD float two_bit_value(std::uint32_t code, float scale) {
  return scale * (static_cast<float>(2 * static_cast<std::int32_t>(code) - 3) / 3.0f);
}

// --- DCT per chunk (DeMo) ---------------------------------------------------------------------
// sum_{t < n} m[t m_stride] v[t v_stride], in fp32, in order from t = 0: a row (m_stride 1) or
// column (m_stride N) of a DCT matrix against a row or column of a chunk.
DTSIM_HD float strided_dot(const float* m, std::int64_t m_stride, const float* v, std::int64_t v_stride,
                           std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t t = 0; t < n; ++t) s = s + m[t * m_stride] * v[t * v_stride];
  return s;
}

// Top-k per chunk: element i of a chunk outranks j when its magnitude key is larger, or
// equal with i < j (a strict total order, so every device keeps the same set).
DTSIM_HD bool outranks(std::uint32_t key_i, std::int64_t i, std::uint32_t key_j, std::int64_t j) {
  return key_i > key_j || (key_i == key_j && i < j);
}

// Indices packed LSB first, `bits` each, into 32-bit words: word w holds bits [32 w, 32 w + 32)
// of the stream in which index q occupies bits [q bits, (q + 1) bits).
DTSIM_HD std::uint32_t packed_word(const std::int32_t* idx, std::int64_t count, std::int32_t bits, std::int64_t w) {
  const std::int64_t first_bit = 32 * w;
  std::uint32_t word = 0;
  for (std::int64_t q = first_bit / bits; q < count && q * bits < first_bit + 32; ++q) {
    const std::uint64_t value = static_cast<std::uint32_t>(idx[q]);
    const std::int64_t shift = q * bits - first_bit;  // may be negative: the index started in the last word
    const std::uint64_t placed = shift >= 0 ? (value << shift) : (value >> (-shift));
    word |= static_cast<std::uint32_t>(placed & 0xFFFFFFFFULL);
  }
  return word;
}

DTSIM_HD std::int32_t unpacked_index(const std::uint32_t* words, std::int32_t bits, std::int64_t q) {
  const std::int64_t bit = q * bits;
  const std::int64_t w = bit / 32, shift = bit % 32;
  std::uint64_t v = words[w] >> shift;
  if (shift + bits > 32) v |= static_cast<std::uint64_t>(words[w + 1]) << (32 - shift);
  return static_cast<std::int32_t>(v & ((1ULL << bits) - 1ULL));
}

}  // namespace dtsim::kernels::detail
