#include "kernels/cpu/cast.hpp"

#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <algorithm>
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
[[DTSIM_TARGET_AVX2]] void to_bf16_avx2(const float* x, std::int64_t n, std::uint16_t* out) {
  to_bf16_loop(x, n, out);
}
[[DTSIM_TARGET_AVX2]] void from_bf16_avx2(const std::uint16_t* h, std::int64_t n, float weight,
                                                          bool acc, float* out) {
  from_bf16_loop(h, n, weight, acc, out);
}

// F16C conversion (round to nearest even), NaN lanes replaced by sign | 0x7E00.
[[DTSIM_TARGET_AVX2]] void to_half_avx2(const float* x, std::int64_t n, std::uint16_t* out) {
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

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized (their _mm512_undefined_* operands).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// AVX-512: 16 lanes per conversion; the NaN fix-up (rare) only when a lane is NaN.
[[DTSIM_TARGET_AVX512]] void to_half_avx512(const float* x, std::int64_t n, std::uint16_t* out) {
  const __m512i signmask = _mm512_set1_epi32(static_cast<int>(0x80000000U));
  const __m512i qnan = _mm512_set1_epi32(0x7E00);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __mmask16 isnan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    if (isnan) {
      const __m512i canon = _mm512_or_si512(_mm512_srli_epi32(_mm512_and_si512(_mm512_castps_si512(v), signmask), 16), qnan);
      h = _mm256_mask_blend_epi16(isnan, h, _mm512_cvtepi32_epi16(canon));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  to_half_avx2(x + i, n - i, out + i);
}
[[DTSIM_TARGET_AVX512]] void to_bf16_avx512(const float* x, std::int64_t n, std::uint16_t* out) {
  to_bf16_loop(x, n, out);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

[[DTSIM_TARGET_AVX2]] void from_half_avx2(const std::uint16_t* h, std::int64_t n, float weight,
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

void add_base(float* m, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) m[i] = m[i] + x[i];
}
#if defined(__x86_64__)
[[DTSIM_TARGET_AVX2]] void add_avx2(float* m, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) m[i] = m[i] + x[i];
}
#endif

// Error feedback over [a, b) in blocks of 1024 (4 KB, L1-resident between the sweeps):
// m += x, cast, m += -1 * widen(cast).
template <bool kHalf>
void feedback_range(float* m, const float* x, std::int64_t a, std::int64_t b, std::uint16_t* h) {
  constexpr std::int64_t kBlock = 1024;
  for (std::int64_t i = a; i < b; i += kBlock) {
    const std::int64_t c = std::min(kBlock, b - i);
#if defined(__x86_64__)
    if (has_avx2()) {
      add_avx2(m + i, x + i, c);
      if constexpr (kHalf) {
        if (has_avx512())
          to_half_avx512(m + i, c, h + i);
        else
          to_half_avx2(m + i, c, h + i);
        from_half_avx2(h + i, c, -1.0f, true, m + i);
      } else {
        to_bf16_avx2(m + i, c, h + i);
        from_bf16_avx2(h + i, c, -1.0f, true, m + i);
      }
      continue;
    }
#endif
    add_base(m + i, x + i, c);
    if constexpr (kHalf) {
      to_half_generic(m + i, c, h + i);
      from_half_generic(h + i, c, -1.0f, true, m + i);
    } else {
      to_bf16_base(m + i, c, h + i);
      from_bf16_base(h + i, c, -1.0f, true, m + i);
    }
  }
}

}  // namespace

void add_float_to_half_feedback(float* m, const float* x, std::int64_t n, std::uint16_t* h) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) { feedback_range<true>(m, x, a, b, h); });
}

void add_float_to_bfloat16_feedback(float* m, const float* x, std::int64_t n, std::uint16_t* h) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) { feedback_range<false>(m, x, a, b, h); });
}

void float_to_half(const float* x, std::int64_t n, std::uint16_t* out) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
#if defined(__x86_64__)
    if (has_avx512()) return to_half_avx512(x + a, b - a, out + a);
    if (has_avx2()) return to_half_avx2(x + a, b - a, out + a);
#endif
    to_half_generic(x + a, b - a, out + a);
  });
}

void float_to_bfloat16(const float* x, std::int64_t n, std::uint16_t* out) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
#if defined(__x86_64__)
    if (has_avx512()) return to_bf16_avx512(x + a, b - a, out + a);
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
