#include "kernels/cpu/cast.hpp"

#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <cstring>

#include "kernels/cpu/common.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtsim::kernels::cpu {

namespace {

constexpr std::int64_t kGrain = 1 << 16;

[[gnu::always_inline]] inline std::uint16_t bf16_bits(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  const bool nan = (b & 0x7FFFFFFFU) > 0x7F800000U;
  const std::uint32_t rounded = (b + 0x7FFFU + ((b >> 16) & 1U)) >> 16;
  return nan ? static_cast<std::uint16_t>(0x7FC0U) : static_cast<std::uint16_t>(rounded);
}

[[gnu::always_inline]] inline void to_bf16_loop(const float* x, std::int64_t n, std::uint16_t* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_bits(x[i]);
}

[[gnu::always_inline]] inline float bf16_value(std::uint16_t h) {
  const std::uint32_t b = static_cast<std::uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

[[gnu::always_inline]] inline void from_bf16_loop(const std::uint16_t* h, std::int64_t n, float weight, bool acc,
                                                  float* out) {
  if (acc) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = out[i] + weight * bf16_value(h[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_value(h[i]);
  }
}

void to_half_generic(const float* x, std::int64_t n, std::uint16_t* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = c10::Half(x[i]).x;
}
void from_half_generic(const std::uint16_t* h, std::int64_t n, float weight, bool acc, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(c10::Half(h[i], c10::Half::from_bits()));
    out[i] = acc ? out[i] + weight * v : v;
  }
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma,f16c,bmi2")]] void to_bf16_avx2(const float* x, std::int64_t n, std::uint16_t* out) {
  to_bf16_loop(x, n, out);
}
[[gnu::target("avx2,fma,f16c,bmi2")]] void from_bf16_avx2(const std::uint16_t* h, std::int64_t n, float weight,
                                                          bool acc, float* out) {
  from_bf16_loop(h, n, weight, acc, out);
}

// F16C conversion (round to nearest even), NaN lanes replaced by sign | 0x7E00.
[[gnu::target("avx2,fma,f16c,bmi2")]] void to_half_avx2(const float* x, std::int64_t n, std::uint16_t* out) {
  const __m256i signmask = _mm256_set1_epi32(static_cast<int>(0x80000000U));
  const __m256i qnan = _mm256_set1_epi32(0x7E00);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i isnan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i canon =
        _mm256_or_si256(_mm256_srli_epi32(_mm256_and_si256(_mm256_castps_si256(v), signmask), 16), qnan);
    const __m128i canon16 = _mm_packus_epi32(_mm256_castsi256_si128(canon), _mm256_extracti128_si256(canon, 1));
    const __m128i mask16 = _mm_packs_epi32(_mm256_castsi256_si128(isnan), _mm256_extracti128_si256(isnan, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_blendv_epi8(h, canon16, mask16));
  }
  to_half_generic(x + i, n - i, out + i);
}

[[gnu::target("avx2,fma,f16c,bmi2")]] void from_half_avx2(const std::uint16_t* h, std::int64_t n, float weight,
                                                          bool acc, float* out) {
  const __m256 w = _mm256_set1_ps(weight);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    _mm256_storeu_ps(out + i, acc ? _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(w, v)) : v);
  }
  from_half_generic(h + i, n - i, weight, acc, out + i);
}
#endif

void to_bf16_base(const float* x, std::int64_t n, std::uint16_t* out) { to_bf16_loop(x, n, out); }
void from_bf16_base(const std::uint16_t* h, std::int64_t n, float weight, bool acc, float* out) {
  from_bf16_loop(h, n, weight, acc, out);
}

}  // namespace

void float_to_half(const float* x, std::int64_t n, std::uint16_t* out) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
#if defined(__x86_64__)
    if (has_avx2()) return to_half_avx2(x + a, b - a, out + a);
#endif
    to_half_generic(x + a, b - a, out + a);
  });
}

void float_to_bfloat16(const float* x, std::int64_t n, std::uint16_t* out) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
#if defined(__x86_64__)
    if (has_avx2()) return to_bf16_avx2(x + a, b - a, out + a);
#endif
    to_bf16_base(x + a, b - a, out + a);
  });
}

void half_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
#if defined(__x86_64__)
    if (has_avx2()) return from_half_avx2(h + a, b - a, weight, accumulate, out + a);
#endif
    from_half_generic(h + a, b - a, weight, accumulate, out + a);
  });
}

void bfloat16_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
#if defined(__x86_64__)
    if (has_avx2()) return from_bf16_avx2(h + a, b - a, weight, accumulate, out + a);
#endif
    from_bf16_base(h + a, b - a, weight, accumulate, out + a);
  });
}

}  // namespace dtsim::kernels::cpu
