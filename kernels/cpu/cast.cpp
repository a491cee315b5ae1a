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

// --- portable paths (the reference every vector path equals bit for bit) -----------------

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

void to_bf16_base(const float* x, std::int64_t n, std::uint16_t* out) { to_bf16_loop(x, n, out); }
void from_bf16_base(const std::uint16_t* h, std::int64_t n, float weight, bool acc, float* out) {
  from_bf16_loop(h, n, weight, acc, out);
}

#if defined(__x86_64__)
// --- AVX2 (8 lanes) -------------------------------------------------------------------------
// kStream: non-temporal stores, to an address aligned to the store's width (the caller's
// with_stores sees to it); tails go through the cache.

template <bool kStream>
[[DTSIM_TARGET_AVX2, gnu::always_inline]] inline void store_si128(std::uint16_t* p, __m128i v) {
  if constexpr (kStream) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), v);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
  }
}
template <bool kStream>
[[DTSIM_TARGET_AVX2, gnu::always_inline]] inline void store_si256(std::uint16_t* p, __m256i v) {
  if constexpr (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
}
template <bool kStream>
[[DTSIM_TARGET_AVX2, gnu::always_inline]] inline void store_ps256(float* p, __m256 v) {
  if constexpr (kStream) {
    _mm256_stream_ps(p, v);
  } else {
    _mm256_storeu_ps(p, v);
  }
}

// F16C conversion (round to nearest even), NaN lanes replaced by sign | 0x7E00.
template <bool kStream = false>
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
    store_si128<kStream>(out + i, _mm_blendv_epi8(h, canon16, mask16));
  }
  to_half_generic(x + i, n - i, out + i);
}

// bf16_bits on 8 lanes, as 32-bit lanes holding the 16-bit results.
[[DTSIM_TARGET_AVX2, gnu::always_inline]] inline __m256i bf16_lanes_avx2(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);  // (b & 0x7FFFFFFF) > 0x7F800000
  return _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(nan));
}

template <bool kStream = false>
[[DTSIM_TARGET_AVX2]] void to_bf16_avx2(const float* x, std::int64_t n, std::uint16_t* out) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = bf16_lanes_avx2(_mm256_loadu_ps(x + i)), hi = bf16_lanes_avx2(_mm256_loadu_ps(x + i + 8));
    // packus interleaves the 128-bit halves (lo0 hi0 lo1 hi1); the permute restores the order
    store_si256<kStream>(out + i, _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8));
  }
  to_bf16_loop(x + i, n - i, out + i);
}

template <bool kStream = false>
[[DTSIM_TARGET_AVX2]] void from_half_avx2(const std::uint16_t* h, std::int64_t n, float weight, bool acc, float* out) {
  const __m256 w = _mm256_set1_ps(weight);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    store_ps256<kStream>(out + i, acc ? _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(w, v)) : v);
  }
  from_half_generic(h + i, n - i, weight, acc, out + i);
}

template <bool kStream = false>
[[DTSIM_TARGET_AVX2]] void from_bf16_avx2(const std::uint16_t* h, std::int64_t n, float weight, bool acc, float* out) {
  const __m256 w = _mm256_set1_ps(weight);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    const __m256 v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    store_ps256<kStream>(out + i, acc ? _mm256_add_ps(_mm256_loadu_ps(out + i), _mm256_mul_ps(w, v)) : v);
  }
  from_bf16_loop(h + i, n - i, weight, acc, out + i);
}

[[DTSIM_TARGET_AVX2]] void add_avx2(float* m, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) m[i] = m[i] + x[i];
}

// n fp16 / bf16 values from L1-resident src to dst with non-temporal stores (error
// feedback's payload: it converts into a local block, which it widens back, then streams).
[[DTSIM_TARGET_AVX2]] void stream_copy(std::uint16_t* dst, const std::uint16_t* src, std::int64_t n) {
  std::int64_t i = 0;
  while (i < n && reinterpret_cast<std::uintptr_t>(dst + i) % 32 != 0) {
    dst[i] = src[i];
    ++i;
  }
  for (; i + 16 <= n; i += 16)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
  for (; i < n; ++i) dst[i] = src[i];
}

// --- AVX-512 (16 lanes) ----------------------------------------------------------------------

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized (their _mm512_undefined_* operands).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// 16 lanes per conversion; the NaN fix-up (rare) only when a lane is NaN.
template <bool kStream = false>
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
    store_si256<kStream>(out + i, h);
  }
  to_half_avx2(x + i, n - i, out + i);
}

// bf16_bits on 32 lanes: 32-bit integer rounding on 16 lanes at a time, then the high
// halves of both vectors' lanes gathered by one word permute.
template <bool kStream = false>
[[DTSIM_TARGET_AVX512]] void to_bf16_avx512(const float* x, std::int64_t n, std::uint16_t* out) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7FFF);
  // words 2k + 1 of r0, then of r1 (indices 32..63): the lanes' high halves, in order
  static constexpr std::uint16_t kHighWords[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
                                                   33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  const __m512i high_words = _mm512_loadu_si512(kHighWords);
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    const __m512i b0 = _mm512_castps_si512(v0), b1 = _mm512_castps_si512(v1);
    const __m512i r0 = _mm512_add_epi32(_mm512_add_epi32(b0, bias), _mm512_and_si512(_mm512_srli_epi32(b0, 16), one));
    const __m512i r1 = _mm512_add_epi32(_mm512_add_epi32(b1, bias), _mm512_and_si512(_mm512_srli_epi32(b1, 16), one));
    const __m512i h = _mm512_permutex2var_epi16(r0, high_words, r1);
    const __mmask32 nan =
        _mm512_kunpackw(_mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q), _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q));
    const __m512i out_v = _mm512_mask_blend_epi16(nan, h, _mm512_set1_epi16(0x7FC0));
    if constexpr (kStream) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), out_v);
    } else {
      _mm512_storeu_si512(out + i, out_v);
    }
  }
  to_bf16_avx2(x + i, n - i, out + i);
}

template <bool kStream = false>
[[DTSIM_TARGET_AVX512]] void from_half_avx512(const std::uint16_t* h, std::int64_t n, float weight, bool acc,
                                              float* out) {
  const __m512 w = _mm512_set1_ps(weight);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
    const __m512 r = acc ? _mm512_add_ps(_mm512_loadu_ps(out + i), _mm512_mul_ps(w, v)) : v;
    if constexpr (kStream) {
      _mm512_stream_ps(out + i, r);
    } else {
      _mm512_storeu_ps(out + i, r);
    }
  }
  from_half_avx2(h + i, n - i, weight, acc, out + i);
}

template <bool kStream = false>
[[DTSIM_TARGET_AVX512]] void from_bf16_avx512(const std::uint16_t* h, std::int64_t n, float weight, bool acc,
                                              float* out) {
  const __m512 w = _mm512_set1_ps(weight);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i));
    const __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    const __m512 r = acc ? _mm512_add_ps(_mm512_loadu_ps(out + i), _mm512_mul_ps(w, v)) : v;
    if constexpr (kStream) {
      _mm512_stream_ps(out + i, r);
    } else {
      _mm512_storeu_ps(out + i, r);
    }
  }
  from_bf16_avx2(h + i, n - i, weight, acc, out + i);
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // __x86_64__

void add_base(float* m, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) m[i] = m[i] + x[i];
}

// --- dispatch -----------------------------------------------------------------------------

// Whether a fresh output of `bytes` is streamed (only the vector paths stream).
bool streams(Store store, std::int64_t bytes) {
  if (store == Store::cached || !has_avx2()) return false;
  return store == Store::streaming || bytes >= kStreamMinBytes;
}

// Runs f(i0, i1, stream) over the elements [a, b) of an output of `elem`-byte elements.
// Streaming: the elements before the output's first 64-byte boundary go through the cache
// (the non-temporal stores need aligned addresses; an output that is not even
// element-aligned is not streamed), the rest streamed, then a store fence (non-temporal
// stores are weakly ordered: the fence makes them visible before the range is reported done).
template <class F>
void with_stores(bool stream, const void* out, std::int64_t elem, std::int64_t a, std::int64_t b, F&& f) {
  const auto p = reinterpret_cast<std::uintptr_t>(out) + static_cast<std::uintptr_t>(a * elem);
  if (!stream || p % static_cast<std::uintptr_t>(elem) != 0) return f(a, b, false);
  const std::int64_t head = std::min(b, a + static_cast<std::int64_t>((64 - p % 64) % 64) / elem);
  f(a, head, false);
  f(head, b, true);
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// Error feedback over [a, b) in blocks of 1024 (4 KB, L1-resident between the sweeps):
// m += x, cast, m += -1 * widen(cast). Streaming h: the block is cast into a local buffer,
// widened back from it, and then streamed to h (reading h back right after non-temporal
// stores would fetch it from memory).
template <bool kHalf>
void feedback_range(float* m, const float* x, std::int64_t a, std::int64_t b, std::uint16_t* h, bool stream) {
  constexpr std::int64_t kBlock = 1024;
  alignas(64) std::uint16_t local[kBlock];
  for (std::int64_t i = a; i < b; i += kBlock) {
    const std::int64_t c = std::min(kBlock, b - i);
#if defined(__x86_64__)
    if (has_avx2()) {
      std::uint16_t* hb = stream ? local : h + i;
      add_avx2(m + i, x + i, c);
      if constexpr (kHalf) {
        if (has_avx512()) {
          to_half_avx512(m + i, c, hb);
          from_half_avx512(hb, c, -1.0f, true, m + i);
        } else {
          to_half_avx2(m + i, c, hb);
          from_half_avx2(hb, c, -1.0f, true, m + i);
        }
      } else {
        if (has_avx512()) {
          to_bf16_avx512(m + i, c, hb);
          from_bf16_avx512(hb, c, -1.0f, true, m + i);
        } else {
          to_bf16_avx2(m + i, c, hb);
          from_bf16_avx2(hb, c, -1.0f, true, m + i);
        }
      }
      if (stream) stream_copy(h + i, local, c);
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
#if defined(__x86_64__)
  if (stream) _mm_sfence();
#endif
}

}  // namespace

void add_float_to_half_feedback(float* m, const float* x, std::int64_t n, std::uint16_t* h, Store store) {
  const bool stream = streams(store, 2 * n);
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) { feedback_range<true>(m, x, a, b, h, stream); });
}

void add_float_to_bfloat16_feedback(float* m, const float* x, std::int64_t n, std::uint16_t* h, Store store) {
  const bool stream = streams(store, 2 * n);
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) { feedback_range<false>(m, x, a, b, h, stream); });
}

void float_to_half(const float* x, std::int64_t n, std::uint16_t* out, Store store) {
  const bool stream = streams(store, 2 * n);
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
    with_stores(stream, out, 2, a, b, [&](std::int64_t i0, std::int64_t i1, bool s) {
#if defined(__x86_64__)
      const std::int64_t c = i1 - i0;
      if (has_avx512()) return s ? to_half_avx512<true>(x + i0, c, out + i0) : to_half_avx512(x + i0, c, out + i0);
      if (has_avx2()) return s ? to_half_avx2<true>(x + i0, c, out + i0) : to_half_avx2(x + i0, c, out + i0);
#endif
      to_half_generic(x + i0, i1 - i0, out + i0);
    });
  });
}

void float_to_bfloat16(const float* x, std::int64_t n, std::uint16_t* out, Store store) {
  const bool stream = streams(store, 2 * n);
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
    with_stores(stream, out, 2, a, b, [&](std::int64_t i0, std::int64_t i1, bool s) {
#if defined(__x86_64__)
      const std::int64_t c = i1 - i0;
      if (has_avx512()) return s ? to_bf16_avx512<true>(x + i0, c, out + i0) : to_bf16_avx512(x + i0, c, out + i0);
      if (has_avx2()) return s ? to_bf16_avx2<true>(x + i0, c, out + i0) : to_bf16_avx2(x + i0, c, out + i0);
#endif
      to_bf16_base(x + i0, i1 - i0, out + i0);
    });
  });
}

void half_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out, Store store) {
  const bool stream = !accumulate && streams(store, 4 * n);
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
    with_stores(stream, out, 4, a, b, [&](std::int64_t i0, std::int64_t i1, bool s) {
      const std::int64_t c = i1 - i0;
#if defined(__x86_64__)
      if (has_avx512())
        return s ? from_half_avx512<true>(h + i0, c, weight, false, out + i0)
                 : from_half_avx512(h + i0, c, weight, accumulate, out + i0);
      if (has_avx2())
        return s ? from_half_avx2<true>(h + i0, c, weight, false, out + i0)
                 : from_half_avx2(h + i0, c, weight, accumulate, out + i0);
#endif
      from_half_generic(h + i0, c, weight, accumulate, out + i0);
    });
  });
}

void bfloat16_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out, Store store) {
  const bool stream = !accumulate && streams(store, 4 * n);
  at::parallel_for(0, n, kGrain, [&](std::int64_t a, std::int64_t b) {
    with_stores(stream, out, 4, a, b, [&](std::int64_t i0, std::int64_t i1, bool s) {
      const std::int64_t c = i1 - i0;
#if defined(__x86_64__)
      if (has_avx512())
        return s ? from_bf16_avx512<true>(h + i0, c, weight, false, out + i0)
                 : from_bf16_avx512(h + i0, c, weight, accumulate, out + i0);
      if (has_avx2())
        return s ? from_bf16_avx2<true>(h + i0, c, weight, false, out + i0)
                 : from_bf16_avx2(h + i0, c, weight, accumulate, out + i0);
#endif
      from_bf16_base(h + i0, c, weight, accumulate, out + i0);
    });
  });
}

}  // namespace dtsim::kernels::cpu
