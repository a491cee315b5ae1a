#include "kernels/cpu/sign.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <bit>
#include <type_traits>
#include <cmath>

#include "kernels/cpu/common.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtsim::kernels::cpu {

namespace {

// Folds 32 lane sums as a warp's shuffle-down reduction does.
inline float fold32(float* acc) {
  for (int off = 16; off >= 1; off /= 2)
    for (int l = 0; l < off; ++l) acc[l] += acc[l + off];
  return acc[0];
}

template <class T>
inline bool negative(T v) {
  return to_float(v) < 0.0f;
}

// One full chunk inside one segment, portable: 32 words and the lane sums of |x|.
template <class T>
void full_chunk_generic(const T* x, std::uint32_t* words, float* partial) {
  float acc[32] = {};
  for (int r = 0; r < 32; ++r) {
    std::uint32_t w = 0;
    for (int l = 0; l < 32; ++l) {
      const float v = to_float(x[32 * r + l]);
      w |= static_cast<std::uint32_t>(v < 0.0f) << l;
      acc[l] += std::fabs(v);
    }
    words[r] = w;
  }
  if (partial) *partial = fold32(acc);
}

#if defined(__x86_64__)
// The same with AVX2: compare + movemask for the bits, four 8-lane accumulators holding
// lanes 0-7, 8-15, 16-23, 24-31, folded in the same order as fold32.
[[DTSIM_TARGET_AVX2]] void full_chunk_avx2(const float* x, std::uint32_t* words, float* partial) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
  for (int r = 0; r < 32; ++r) {
    const float* p = x + 32 * r;
    const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8), v2 = _mm256_loadu_ps(p + 16),
                 v3 = _mm256_loadu_ps(p + 24);
    const unsigned m0 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v0, zero, _CMP_LT_OQ)));
    const unsigned m1 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v1, zero, _CMP_LT_OQ)));
    const unsigned m2 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v2, zero, _CMP_LT_OQ)));
    const unsigned m3 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v3, zero, _CMP_LT_OQ)));
    words[r] = m0 | (m1 << 8) | (m2 << 16) | (m3 << 24);
    if (partial) {
      a0 = _mm256_add_ps(a0, _mm256_and_ps(v0, absmask));
      a1 = _mm256_add_ps(a1, _mm256_and_ps(v1, absmask));
      a2 = _mm256_add_ps(a2, _mm256_and_ps(v2, absmask));
      a3 = _mm256_add_ps(a3, _mm256_and_ps(v3, absmask));
    }
  }
  if (partial) {
    a0 = _mm256_add_ps(a0, a2);  // offset 16
    a1 = _mm256_add_ps(a1, a3);
    a0 = _mm256_add_ps(a0, a1);  // offset 8
    alignas(32) float acc[8];
    _mm256_store_ps(acc, a0);
    for (int off = 4; off >= 1; off /= 2)
      for (int l = 0; l < off; ++l) acc[l] += acc[l + off];
    *partial = acc[0];
  }
}

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized (their _mm512_undefined_* operands).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// AVX-512: compare into a mask register for the bits, two 16-lane accumulators holding
// lanes 0-15 and 16-31 (half the additions of the AVX2 path), folded as fold32.
[[DTSIM_TARGET_AVX512]] void full_chunk_avx512(const float* x, std::uint32_t* words, float* partial) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  __m512 a0 = zero, a1 = zero;
  for (int r = 0; r < 32; ++r) {
    const float* p = x + 32 * r;
    const __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16);
    const unsigned m0 = _mm512_cmp_ps_mask(v0, zero, _CMP_LT_OQ);
    const unsigned m1 = _mm512_cmp_ps_mask(v1, zero, _CMP_LT_OQ);
    words[r] = m0 | (m1 << 16);
    if (partial) {
      a0 = _mm512_add_ps(a0, _mm512_and_ps(v0, absmask));
      a1 = _mm512_add_ps(a1, _mm512_and_ps(v1, absmask));
    }
  }
  if (partial) {
    a0 = _mm512_add_ps(a0, a1);  // offset 16
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a0), _mm512_extractf32x8_ps(a0, 1));  // offset 8
    alignas(32) float acc[8];
    _mm256_store_ps(acc, h);
    for (int off = 4; off >= 1; off /= 2)
      for (int l = 0; l < off; ++l) acc[l] += acc[l + off];
    *partial = acc[0];
  }
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif

template <class T>
void full_chunk(const T* x, std::uint32_t* words, float* partial) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float>) {
    if (has_avx512()) return full_chunk_avx512(x, words, partial);
    if (has_avx2()) return full_chunk_avx2(x, words, partial);
  }
#endif
  full_chunk_generic(x, words, partial);
}

// A chunk that is the buffer's tail or holds segment boundaries.
template <class T>
void boundary_chunk(const T* x, std::int64_t n, std::int64_t c, const std::int64_t* offsets, std::int64_t L,
                    std::int64_t seg, const std::int64_t* slot_begin, std::uint32_t* words, float* abs_partials) {
  const std::int64_t base = c * kChunk, end = std::min(n, base + kChunk);
  for (std::int64_t w = base / 32; w < (end + 31) / 32; ++w) {
    std::uint32_t bits = 0;
    for (std::int64_t i = 32 * w; i < std::min(end, 32 * w + 32); ++i)
      bits |= static_cast<std::uint32_t>(negative(x[i])) << (i - 32 * w);
    words[w] = bits;
  }
  if (!abs_partials) return;
  for (std::int64_t s = seg; s < L && offsets[s] < end; ++s) {
    const std::int64_t a = std::max(offsets[s], base), b = std::min(offsets[s + 1], end);
    if (b <= a) continue;
    float acc[32] = {};
    for (int r = 0; r < 32; ++r)
      for (int l = 0; l < 32; ++l) {
        const std::int64_t i = base + 32 * r + l;
        acc[l] += (i >= a && i < b) ? std::fabs(to_float(x[i])) : 0.0f;
      }
    abs_partials[slot_begin[s] + c - offsets[s] / kChunk] = fold32(acc);
  }
}

}  // namespace

template <class T>
void pack_signs(const T* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                const std::int64_t* slot_begin, std::uint32_t* words, float* abs_partials) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  at::parallel_for(0, chunks, 64, [&](std::int64_t c0, std::int64_t c1) {
    // First segment that ends after chunk c0 starts (skipping empty ones).
    std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, c0 * kChunk) - offsets - 1;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t base = c * kChunk;
      while (seg < L && offsets[seg + 1] <= base) ++seg;
      if (base + kChunk <= n && seg < L && offsets[seg] <= base && offsets[seg + 1] >= base + kChunk) {
        float* partial = abs_partials ? abs_partials + slot_begin[seg] + c - offsets[seg] / kChunk : nullptr;
        full_chunk(x + base, words + base / 32, partial);
      } else {
        boundary_chunk(x, n, c, offsets, L, seg, slot_begin, words, abs_partials);
      }
    }
  });
}

namespace {

// Words [w0, w1) of segment [a, b): value = (bit ? -sc : sc); out = value, or
// out + weight * value. Full words are fixed 32-lane loops (vectorized with a variable
// shift per lane in the AVX2 / AVX-512 clones).
template <class T>
[[gnu::always_inline]] inline void decode_words(const std::uint32_t* words, std::int64_t w0, std::int64_t w1,
                                                std::int64_t a, std::int64_t b, float sc, float weight,
                                                bool accumulate, T* out) {
  for (std::int64_t w = w0; w < w1; ++w) {
    const std::uint32_t bits = words[w];
    const std::int64_t lo = std::max(a, 32 * w), hi = std::min(b, 32 * w + 32);
    T* __restrict o = out + 32 * w;
    if (lo == 32 * w && hi == 32 * w + 32) {
      if (accumulate) {
        for (int j = 0; j < 32; ++j) {
          const float v = ((bits >> j) & 1U) ? -sc : sc;
          o[j] = static_cast<T>(to_float(o[j]) + weight * v);
        }
      } else {
        for (int j = 0; j < 32; ++j) o[j] = static_cast<T>(((bits >> j) & 1U) ? -sc : sc);
      }
    } else {
      for (std::int64_t i = lo; i < hi; ++i) {
        const float v = ((bits >> (i - 32 * w)) & 1U) ? -sc : sc;
        out[i] = accumulate ? static_cast<T>(to_float(out[i]) + weight * v) : static_cast<T>(v);
      }
    }
  }
}
template <class T>
void decode_words_base(const std::uint32_t* words, std::int64_t w0, std::int64_t w1, std::int64_t a, std::int64_t b,
                       float sc, float weight, bool accumulate, T* out) {
  decode_words(words, w0, w1, a, b, sc, weight, accumulate, out);
}
#if defined(__x86_64__)
[[DTSIM_TARGET_AVX2]] void decode_words_avx2(const std::uint32_t* words, std::int64_t w0, std::int64_t w1,
                                             std::int64_t a, std::int64_t b, float sc, float weight, bool accumulate,
                                             float* out) {
  decode_words(words, w0, w1, a, b, sc, weight, accumulate, out);
}
#endif

// Majority vote over words [w0, w1) (all full: 32 elements each), 16 words at a time:
// a bit-sliced counter per bit position (counter bit k of the 16 words in c[k][0..16))
// counts the negative votes, ripple-carry adding one rank's words per step; then the
// count is compared with R / 2 bit-serially (MSB first) and the result expanded to floats.
constexpr int kVoteWords = 16;

[[gnu::always_inline]] inline void vote_block(const std::uint32_t* const* words, std::int64_t R, int K,
                                              std::int64_t w, int cnt, float* __restrict out) {
  std::uint32_t c[33][kVoteWords];
  for (int k = 0; k < K; ++k)
    for (int l = 0; l < kVoteWords; ++l) c[k][l] = 0;
  std::uint32_t carry[kVoteWords];
  for (std::int64_t r = 0; r < R; ++r) {
    const std::uint32_t* src = words[r] + w;
    if (cnt == kVoteWords) {
      for (int l = 0; l < kVoteWords; ++l) carry[l] = src[l];
    } else {
      for (int l = 0; l < kVoteWords; ++l) carry[l] = l < cnt ? src[l] : 0U;
    }
    for (int k = 0; k < K; ++k)
      for (int l = 0; l < kVoteWords; ++l) {
        const std::uint32_t t = c[k][l] & carry[l];
        c[k][l] ^= carry[l];
        carry[l] = t;
      }
  }
  // neg > floor(R/2): the sum is negative; neg == R/2 with R even: a tie.
  const auto T = static_cast<std::uint64_t>(R / 2);
  std::uint32_t gt[kVoteWords] = {}, eq[kVoteWords];
  for (int l = 0; l < kVoteWords; ++l) eq[l] = ~0U;
  for (int k = K - 1; k >= 0; --k) {
    if ((T >> k) & 1U) {
      for (int l = 0; l < kVoteWords; ++l) eq[l] &= c[k][l];
    } else {
      for (int l = 0; l < kVoteWords; ++l) {
        gt[l] |= eq[l] & c[k][l];
        eq[l] &= ~c[k][l];
      }
    }
  }
  if (R % 2 == 1)
    for (int l = 0; l < kVoteWords; ++l) eq[l] = 0;
  for (int l = 0; l < cnt; ++l) {
    float* __restrict o = out + 32 * (w + l);
    const std::uint32_t g = gt[l], t = eq[l];
    for (int j = 0; j < 32; ++j) {
      const auto neg = static_cast<std::int32_t>((g >> j) & 1U), tie = static_cast<std::int32_t>((t >> j) & 1U);
      o[j] = static_cast<float>(1 - 2 * neg - tie);  // -1, 0 or +1
    }
  }
}

[[gnu::always_inline]] inline void vote_words(const std::uint32_t* const* words, std::int64_t R, int K, std::int64_t w0,
                                              std::int64_t w1, float* out) {
  for (std::int64_t w = w0; w < w1; w += kVoteWords)
    vote_block(words, R, K, w, static_cast<int>(std::min<std::int64_t>(kVoteWords, w1 - w)), out);
}
void vote_words_base(const std::uint32_t* const* words, std::int64_t R, int K, std::int64_t w0, std::int64_t w1,
                     float* out) {
  vote_words(words, R, K, w0, w1, out);
}
#if defined(__x86_64__)
[[DTSIM_TARGET_AVX2]] void vote_words_avx2(const std::uint32_t* const* words, std::int64_t R, int K, std::int64_t w0,
                                           std::int64_t w1, float* out) {
  vote_words(words, R, K, w0, w1, out);
}
#endif

}  // namespace

template <class T>
void decode_signs(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                  const float* scales, float weight, bool accumulate, T* out) {
  (void)n;
  for (std::int64_t s = 0; s < L; ++s) {
    const float sc = scales ? scales[s] : 1.0f;
    const std::int64_t a = offsets[s], b = offsets[s + 1];
    at::parallel_for(a / 32, (b + 31) / 32, 2048, [&](std::int64_t w0, std::int64_t w1) {
#if defined(__x86_64__)
      if constexpr (std::is_same_v<T, float>) {
        if (has_avx2()) return decode_words_avx2(words, w0, w1, a, b, sc, weight, accumulate, out);
      }
#endif
      decode_words_base(words, w0, w1, a, b, sc, weight, accumulate, out);
    });
  }
}

namespace {

[[gnu::always_inline]] inline void add_range(float* __restrict m, const float* __restrict x, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) m[i] = m[i] + x[i];
}
void add_range_base(float* m, const float* x, std::int64_t count) { add_range(m, x, count); }
#if defined(__x86_64__)
[[DTSIM_TARGET_AVX2]] void add_range_avx2(float* m, const float* x, std::int64_t count) { add_range(m, x, count); }
#endif

}  // namespace

void add_pack_signs(float* m, const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::int64_t* slot_begin, std::uint32_t* words, float* abs_partials, bool subtract_unit) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  const bool avx2 = has_avx2();
  at::parallel_for(0, chunks, 64, [&](std::int64_t c0, std::int64_t c1) {
    std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, c0 * kChunk) - offsets - 1;
    for (std::int64_t c = c0; c < c1; ++c) {
      // one chunk (4 KB) at a time, so the three sweeps below read memory once
      const std::int64_t base = c * kChunk, end = std::min(n, base + kChunk);
#if defined(__x86_64__)
      if (avx2)
        add_range_avx2(m + base, x + base, end - base);
      else
#endif
        add_range_base(m + base, x + base, end - base);
      while (seg < L && offsets[seg + 1] <= base) ++seg;
      if (end == base + kChunk && seg < L && offsets[seg] <= base && offsets[seg + 1] >= end) {
        float* partial = abs_partials ? abs_partials + slot_begin[seg] + c - offsets[seg] / kChunk : nullptr;
        full_chunk(static_cast<const float*>(m + base), words + base / 32, partial);
      } else {
        boundary_chunk(static_cast<const float*>(m), n, c, offsets, L, seg, slot_begin, words, abs_partials);
      }
      if (!subtract_unit) continue;
#if defined(__x86_64__)
      if (avx2) {
        decode_words_avx2(words, base / 32, (end + 31) / 32, base, end, 1.0f, -1.0f, true, m);
        continue;
      }
#endif
      decode_words_base(words, base / 32, (end + 31) / 32, base, end, 1.0f, -1.0f, true, m);
    }
  });
  (void)avx2;
}

void majority_vote(const std::uint32_t* const* words, std::int64_t R, std::int64_t n, float* out) {
  const std::int64_t full = n / 32;  // words whose 32 elements all exist
  const int K = std::bit_width(static_cast<std::uint64_t>(R));  // counter bits: the count is <= R
  at::parallel_for(0, (full + kVoteWords - 1) / kVoteWords, 64, [&](std::int64_t b0, std::int64_t b1) {
    const std::int64_t w0 = b0 * kVoteWords, w1 = std::min(full, b1 * kVoteWords);
#if defined(__x86_64__)
    if (has_avx2()) return vote_words_avx2(words, R, K, w0, w1, out);
#endif
    vote_words_base(words, R, K, w0, w1, out);
  });
  if (full * 32 < n) {  // the last, partial word
    std::int64_t neg[32] = {};
    for (std::int64_t r = 0; r < R; ++r)
      for (int j = 0; j < 32; ++j) neg[j] += (words[r][full] >> j) & 1U;
    for (std::int64_t i = full * 32; i < n; ++i) {
      const std::int64_t sum = R - 2 * neg[i - full * 32];
      out[i] = sum > 0 ? 1.0f : (sum < 0 ? -1.0f : 0.0f);
    }
  }
}

#define DTSIM_SIGN_INSTANTIATE(T)                                                                        \
  template void pack_signs<T>(const T*, std::int64_t, const std::int64_t*, std::int64_t, const std::int64_t*, \
                              std::uint32_t*, float*);                                                   \
  template void decode_signs<T>(const std::uint32_t*, std::int64_t, const std::int64_t*, std::int64_t,        \
                                const float*, float, bool, T*);
DTSIM_SIGN_INSTANTIATE(float)
DTSIM_SIGN_INSTANTIATE(c10::Half)
DTSIM_SIGN_INSTANTIATE(c10::BFloat16)
#undef DTSIM_SIGN_INSTANTIATE

}  // namespace dtsim::kernels::cpu
