// The per-element formulas of the one_bit, terngrad and natural compressors, shared by
// their CPU codecs (codecs/*.cpp) and their CUDA kernels (cuda/quantizers.cu): both
// devices run these very lines, the same IEEE operations in the same order, so they give
// the same bytes (as hash.hpp's draws). C++17 and no libm: nvcc compiles it too.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/detail/hash.hpp"  // DTSIM_HD

namespace dtsim::kernels::detail {

DTSIM_HD std::uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
#endif
}

DTSIM_HD float bits_float(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float v;
  std::memcpy(&v, &b, 4);
  return v;
#endif
}

// |v| by clearing the sign bit (exact for every input, NaN included).
DTSIM_HD float magnitude(float v) { return bits_float(float_bits(v) & 0x7FFFFFFFU); }

DTSIM_HD bool is_finite(float v) { return (float_bits(v) & 0x7FFFFFFFU) < 0x7F800000U; }

// --- 1-bit SGD (Seide et al. 2014) -------------------------------------------------------
// Each element is one bit, v < 0 or not (the sign kind's rule: 0, -0 and NaN count with
// the non-negative ones), and decodes to the mean of its piece's elements on its side.
// The two parts whose canonical sums (cpu/common.hpp) give a piece's side totals:
DTSIM_HD float non_negative_part(float v) { return v < 0.0f ? 0.0f : v; }
DTSIM_HD float negative_part(float v) { return v < 0.0f ? v : 0.0f; }

// A side's reconstruction value: the mean of its `count` elements, 0 when it has none.
DTSIM_HD float one_bit_mean(float sum, std::int64_t count) {
  return count > 0 ? sum / static_cast<float>(count) : 0.0f;
}

// --- TernGrad (Wen et al. 2017) ------------------------------------------------------------
// In a piece of scale s = max |x|, element v is sent as s * sign(v) * b with
// b ~ Bernoulli(|v| / s), b = [u < |v| / s] for the element's uniform u, so that
// E[decoded] = v. The 2-bit code: bit 0 = b, bit 1 = b and v < 0. A piece whose scale
// is 0 (all zeros) or not finite (it holds NaN or Inf) gets all-zero codes: it decodes
// to 0, or to NaN everywhere (0 * s), as QSGD's non-finite norms do.
DTSIM_HD std::uint32_t terngrad_code(float v, float scale, float u) {
  if (!(scale > 0.0f && is_finite(scale))) return 0;
  const bool b = u < magnitude(v) / scale;
  return b ? (v < 0.0f ? 3U : 1U) : 0U;
}

DTSIM_HD float terngrad_value(std::uint32_t code, float scale) {
  const float ternary = (code & 1U) ? ((code & 2U) ? -1.0f : 1.0f) : 0.0f;
  return scale * ternary;
}

// --- natural compression (Horvath et al. 2019) ----------------------------------------------
// |v| in [2^a, 2^(a+1)) rounds to 2^a with probability (2^(a+1) - |v|) / 2^a, else to
// 2^(a+1) (up iff u < (|v| - 2^a) / 2^a, which is exact in fp32 and is the mantissa /
// 2^23, so that the 24-bit uniforms make E[decoded] = v exactly), keeping the sign; 0 stays
// 0. Sent as the sign bit and the IEEE exponent field of the result (the paper's 9 bits).
// fp32's edges, each as unbiased as the format allows:
// - a subnormal |v| (below 2^-126, the smallest normal power) rounds between 0 and 2^-126
//   (up with probability |v| / 2^-126): 8 bits have no room for the 23 subnormal powers;
// - |v| in [2^127, 2^128) rounding up gives 2^128, which fp32 holds as Inf;
// - +-Inf stays +-Inf (exponent 255), and NaN stays NaN, sent as the one code no rounded
//   value uses: sign bit set, exponent 0 (a -0; zero results are sent as +0).
struct NaturalCode {
  std::uint32_t negative;  // the sign bit
  std::uint32_t exponent;  // the exponent field, 0..255
};

DTSIM_HD NaturalCode natural_code(float v, float u) {
  const std::uint32_t bits = float_bits(v), sign = bits >> 31, exponent = (bits >> 23) & 0xFFU,
                      mantissa = bits & 0x7FFFFFU;
  if (exponent == 0xFFU) return mantissa != 0 ? NaturalCode{1, 0} : NaturalCode{sign, 0xFFU};  // NaN, +-Inf
  if (exponent == 0 && mantissa == 0) return NaturalCode{0, 0};                              // +-0
  // [lower, lower + width): the two representable powers around |v|.
  const float lower = exponent != 0 ? bits_float(exponent << 23) : 0.0f;
  const float width = exponent != 0 ? lower : 0x1p-126f;
  const bool up = u < (magnitude(v) - lower) / width;
  const std::uint32_t rounded = exponent + (up ? 1U : 0U);  // 255 after 254: 2^128, Inf
  return NaturalCode{rounded != 0 ? sign : 0U, rounded};
}

DTSIM_HD float natural_value(std::uint32_t negative, std::uint32_t exponent) {
  if (negative != 0 && exponent == 0) return bits_float(0x7FC00000U);  // NaN
  return bits_float((negative << 31) | (exponent << 23));
}

}  // namespace dtsim::kernels::detail
