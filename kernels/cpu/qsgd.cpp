#include "kernels/cpu/qsgd.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/common.hpp"
#include "kernels/detail/hash.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtsim::kernels::cpu {

namespace {

// Elements per packing block: 64 codes of B bits fill exactly B 64-bit words (2B 32-bit
// words of the stream), so blocks are independent and parallel.
constexpr std::int64_t kBlock = 64;

// The encoder is compute-bound (a few hundred cycles per 4 KB of input), and at sizes
// beyond the L3 share the hardware prefetchers, driven by its slow demand loads, do not run
// far enough ahead: it prefetches the lines of the block 16 blocks (4 KB of fp32) ahead
// itself (about 1.3x faster at 64-256 MB; prefetches past the end are harmless).
constexpr std::int64_t kPrefetchAhead = 16 * kBlock;

template <class T>
[[gnu::always_inline]] inline void prefetch_block(const T* x) {
  constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(T));
  for (std::int64_t e = 0; e < kBlock; e += kLine) __builtin_prefetch(x + e);
}

inline float fold32(float* acc) {
  for (int off = 16; off >= 1; off /= 2)
    for (int l = 0; l < off; ++l) acc[l] += acc[l + off];
  return acc[0];
}

// --- the norm pass ----------------------------------------------------------------------

template <class T>
[[gnu::always_inline]] inline float full_chunk_sumsq(const T* __restrict x) {
  float acc[32] = {};
  for (int r = 0; r < 32; ++r)
    for (int l = 0; l < 32; ++l) {
      const float v = to_float(x[32 * r + l]);
      acc[l] += v * v;
    }
  return fold32(acc);
}

// Error feedback's first pass over a full chunk: m += x, and the lane sums of the new m^2.
[[gnu::always_inline]] inline float full_chunk_add_sumsq(float* __restrict m, const float* __restrict x) {
  float acc[32] = {};
  for (int r = 0; r < 32; ++r)
    for (int l = 0; l < 32; ++l) {
      const float v = m[32 * r + l] + x[32 * r + l];
      m[32 * r + l] = v;
      acc[l] += v * v;
    }
  return fold32(acc);
}

// Partials of one chunk that is the buffer's tail or holds segment boundaries. Each
// segment's lanes sum only the rows it overlaps: the rows outside would add +0 to sums
// that are >= +0 (or NaN), which changes no bit, so small segments (QSGD's buckets) cost
// their own rows, not the chunk's.
template <class T>
void boundary_chunk_sumsq(const T* x, std::int64_t n, std::int64_t c, const std::int64_t* offsets, std::int64_t L,
                          std::int64_t seg, const std::int64_t* slot_begin, float* partials) {
  const std::int64_t base = c * kChunk, end = std::min(n, base + kChunk);
  for (std::int64_t s = seg; s < L && offsets[s] < end; ++s) {
    const std::int64_t a = std::max(offsets[s], base), b = std::min(offsets[s + 1], end);
    if (b <= a) continue;
    float acc[32] = {};
    for (std::int64_t row = base + (a - base) / 32 * 32; row < b; row += 32) {
      if (row >= a && row + 32 <= b) {
        for (int l = 0; l < 32; ++l) {
          const float v = to_float(x[row + l]);
          acc[l] += v * v;
        }
        continue;
      }
      for (int l = 0; l < 32; ++l) {
        const std::int64_t i = row + l;
        const float v = (i >= a && i < b) ? to_float(x[i]) : 0.0f;
        acc[l] += v * v;
      }
    }
    partials[slot_begin[s] + c - offsets[s] / kChunk] = fold32(acc);
  }
}

// Chunks [c0, c1): partial sums of squares of x, or (m != nullptr) of m after m += x.
template <class T>
[[gnu::always_inline]] inline void sumsq_chunks(const T* x, float* m, std::int64_t n, const std::int64_t* offsets,
                                                std::int64_t L, const std::int64_t* slot_begin, float* partials,
                                                std::int64_t c0, std::int64_t c1) {
  std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, c0 * kChunk) - offsets - 1;
  for (std::int64_t c = c0; c < c1; ++c) {
    const std::int64_t base = c * kChunk, end = std::min(n, base + kChunk);
    while (seg < L && offsets[seg + 1] <= base) ++seg;
    if (end == base + kChunk && offsets[seg] <= base && offsets[seg + 1] >= end) {
      float p;
      if constexpr (std::is_same_v<T, float>) {
        p = m ? full_chunk_add_sumsq(m + base, x + base) : full_chunk_sumsq(x + base);
      } else {
        p = full_chunk_sumsq(x + base);
      }
      partials[slot_begin[seg] + c - offsets[seg] / kChunk] = p;
      continue;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (m) {
        for (std::int64_t i = base; i < end; ++i) m[i] = m[i] + x[i];
        boundary_chunk_sumsq(static_cast<const float*>(m), n, c, offsets, L, seg, slot_begin, partials);
        continue;
      }
    }
    boundary_chunk_sumsq(x, n, c, offsets, L, seg, slot_begin, partials);
  }
}

#if defined(__x86_64__)
[[DTSIM_TARGET_AVX2]] void sumsq_chunks_avx2(const float* x, float* m, std::int64_t n,
                                                              const std::int64_t* offsets, std::int64_t L,
                                                              const std::int64_t* slot_begin, float* partials,
                                                              std::int64_t c0, std::int64_t c1) {
  sumsq_chunks(x, m, n, offsets, L, slot_begin, partials, c0, c1);
}
#endif
template <class T>
void sumsq_chunks_base(const T* x, float* m, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                       const std::int64_t* slot_begin, float* partials, std::int64_t c0, std::int64_t c1) {
  sumsq_chunks(x, m, n, offsets, L, slot_begin, partials, c0, c1);
}

template <class T>
void sumsq_dispatch(const T* x, float* m, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::int64_t* slot_begin, float* partials) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  at::parallel_for(0, chunks, 64, [&](std::int64_t c0, std::int64_t c1) {
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>) {
      if (has_avx2()) return sumsq_chunks_avx2(x, m, n, offsets, L, slot_begin, partials, c0, c1);
    }
#endif
    sumsq_chunks_base(x, m, n, offsets, L, slot_begin, partials, c0, c1);
  });
}

// --- codes --------------------------------------------------------------------------------

// The encoding constants of one segment.
struct SegmentCode {
  bool live;           // norm finite and > 0 (otherwise every code is 0)
  float inv;           // levels / norm
  float unit;          // wire norm / levels (error feedback's decode)
  std::uint32_t k_lo, k_hi;
};

inline SegmentCode segment_code(const float* norms, const float* wire_norms, const std::uint64_t* keys, int levels,
                                std::int64_t s) {
  const float norm = norms[s];
  SegmentCode sc;
  sc.live = norm > 0.0f && std::isfinite(norm);
  sc.inv = sc.live ? static_cast<float>(levels) / norm : 0.0f;
  sc.unit = wire_norms ? wire_norms[s] / static_cast<float>(levels) : 0.0f;
  sc.k_lo = static_cast<std::uint32_t>(keys[s]);
  sc.k_hi = static_cast<std::uint32_t>(keys[s] >> 32);
  return sc;
}

// Codes of m consecutive elements xs[0..m) of a live segment, the first being element j0
// of the segment. Branch-free with 32-bit lanes, so that it vectorizes.
template <class T>
[[gnu::always_inline]] inline void codes_run(const T* __restrict xs, std::int32_t m, std::uint32_t j0,
                                             const SegmentCode& sc, std::int32_t smax, int top,
                                             std::uint32_t* __restrict out) {
  const float inv = sc.inv;
  const std::uint32_t k_hi = sc.k_hi;
  // the generator's counter (j0 + j) * step + k_lo (mod 2^32), as an induction variable
  const std::uint32_t h0 = j0 * detail::kStreamStep + sc.k_lo;
  for (std::int32_t j = 0; j < m; ++j) {
    const float v = to_float(xs[j]);
    const float y = std::fabs(v) * inv;
    const std::int32_t li = static_cast<std::int32_t>(y);  // floor: y >= 0 (and <= s + 1)
    const float fl = static_cast<float>(li);
    const std::uint32_t h = detail::stream_mix(h0 + static_cast<std::uint32_t>(j) * detail::kStreamStep, k_hi);
    const float u = static_cast<float>(static_cast<std::int32_t>(h >> 8)) * 0x1.0p-24f;
    std::int32_t level = li + static_cast<std::int32_t>(u < y - fl);
    level = level < smax ? level : smax;
    const std::int32_t neg = static_cast<std::int32_t>(v < 0.0f) & static_cast<std::int32_t>(level > 0);
    out[j] = static_cast<std::uint32_t>(level | (neg << top));
  }
}

// decoded = sign * level * unit; out = out + weight * decoded (the decoder's formula).
template <class T>
[[gnu::always_inline]] inline void apply_codes(const std::uint32_t* __restrict codes, std::int32_t m, float unit,
                                               int top, float weight, bool accumulate, T* __restrict out) {
  const std::uint32_t lmask = (1U << top) - 1U;
  if (accumulate) {
    for (std::int32_t j = 0; j < m; ++j) {
      const float mag = static_cast<float>(static_cast<std::int32_t>(codes[j] & lmask)) * unit;
      const float v = (codes[j] >> top) & 1U ? -mag : mag;
      out[j] = static_cast<T>(to_float(out[j]) + weight * v);
    }
  } else {
    for (std::int32_t j = 0; j < m; ++j) {
      const float mag = static_cast<float>(static_cast<std::int32_t>(codes[j] & lmask)) * unit;
      out[j] = static_cast<T>((codes[j] >> top) & 1U ? -mag : mag);
    }
  }
}

// --- packing: 64 codes of B bits <-> B 64-bit words --------------------------------------
// Codes are paired (2B bits in 32-bit lanes), then paired again (4B <= 40 bits in 64-bit
// lanes), both steps lane-parallel; the 16 quads go to their compile-time bit positions.

// Group I of G codes (G*B bits, G = 4: quads; G = 8: octets, for B <= 8, so 8 placements
// instead of 16) goes to its compile-time bit position, spilling into the next word.
template <int B, int G, int I>
[[gnu::always_inline]] inline void place_group(std::uint64_t g, std::uint64_t* acc) {
  constexpr int bit = I * G * B, w = bit / 64, sh = bit % 64;
  acc[w] |= g << sh;
  if constexpr (sh + G * B > 64) acc[w + 1] |= g >> (64 - sh);
}
template <int B, int G, int... I>
[[gnu::always_inline]] inline void place_groups(const std::uint64_t* g, std::uint64_t* acc,
                                                std::integer_sequence<int, I...>) {
  (place_group<B, G, I>(g[I], acc), ...);
}

template <int B>
[[gnu::always_inline]] inline void pack64(const std::uint32_t* __restrict codes, std::uint64_t* __restrict out) {
  std::uint32_t p[32];
  for (int i = 0; i < 32; ++i) p[i] = codes[2 * i] | (codes[2 * i + 1] << B);
  for (int k = 0; k < B; ++k) out[k] = 0;
  if constexpr (B <= 8) {
    std::uint32_t q[16];
    for (int i = 0; i < 16; ++i) q[i] = p[2 * i] | (p[2 * i + 1] << (2 * B));
    std::uint64_t o[8];
    for (int i = 0; i < 8; ++i) o[i] = std::uint64_t{q[2 * i]} | (std::uint64_t{q[2 * i + 1]} << (4 * B));
    place_groups<B, 8>(o, out, std::make_integer_sequence<int, 8>{});
  } else {
    std::uint64_t q[16];
    for (int i = 0; i < 16; ++i) q[i] = std::uint64_t{p[2 * i]} | (std::uint64_t{p[2 * i + 1]} << (2 * B));
    place_groups<B, 4>(q, out, std::make_integer_sequence<int, 16>{});
  }
}

template <int B, int I>
[[gnu::always_inline]] inline std::uint64_t take_quad(const std::uint64_t* acc) {
  constexpr int bit = I * 4 * B, w = bit / 64, sh = bit % 64;
  constexpr std::uint64_t mask = (std::uint64_t{1} << (4 * B)) - 1;
  if constexpr (sh + 4 * B > 64)
    return ((acc[w] >> sh) | (acc[w + 1] << (64 - sh))) & mask;
  else
    return (acc[w] >> sh) & mask;
}
template <int B, int... I>
[[gnu::always_inline]] inline void take_quads(const std::uint64_t* acc, std::uint64_t* q,
                                              std::integer_sequence<int, I...>) {
  ((q[I] = take_quad<B, I>(acc)), ...);
}

template <int B>
[[gnu::always_inline]] inline void unpack64(const std::uint64_t* __restrict in, std::uint32_t* __restrict codes) {
  std::uint64_t q[16];
  take_quads<B>(in, q, std::make_integer_sequence<int, 16>{});
  constexpr std::uint32_t m2 = (1U << (2 * B)) - 1U, m1 = (1U << B) - 1U;
  std::uint32_t p[32];
  for (int i = 0; i < 16; ++i) {
    p[2 * i] = static_cast<std::uint32_t>(q[i]) & m2;
    p[2 * i + 1] = static_cast<std::uint32_t>(q[i] >> (2 * B));
  }
  for (int i = 0; i < 32; ++i) {
    codes[2 * i] = p[i] & m1;
    codes[2 * i + 1] = p[i] >> B;
  }
}

// --- AVX-512 block codec (B <= 8 bits, levels <= 127) --------------------------------------
// One full 64-element block of a live segment in registers. codes16 does codes_run's
// operations lane for lane (same IEEE operations, same generator), and the packing gives
// pack64's bits: codes paired (2B bits), paired again (4B) and again (octets of 8B <= 64
// bits) in 64-bit lanes with shifts and two-source permutes, then octet I is placed at bit
// I * 8B with variable shifts and at most four permutes (a 64-bit word holds parts of at
// most four octets). The decoder runs the same steps backwards. The portable pack64 /
// unpack64 stay the reference (and serve B = 9, 10 and the partial blocks).

#if defined(__x86_64__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized (their _mm512_undefined_* operands).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Where octet I of a block (8B bits at bit I * 8B) lies in the block's B 64-bit words.
struct OctetLayout {
  std::int64_t shift[8] = {};   // its offset in its first word
  std::int64_t spill[8] = {};   // 64 - shift (a variable shift by 64 gives 0)
  std::int64_t word[8] = {};    // its first word
  std::int64_t next[8] = {};    // the word after (capped at 7; masked off when it does not spill)
  std::int64_t piece[4][8] = {};  // the t-th piece of word k: lane I = octet I << shift[I],
                                  // lane 8 + I = octet I >> (64 - shift[I]) (its spill)
  std::uint8_t has[4] = {};     // the words that have a t-th piece
};

constexpr OctetLayout octet_layout(int B) {
  OctetLayout o;
  int pieces[8] = {};
  auto add = [&](int k, int lane) {
    if (pieces[k] == 4) throw "more than four pieces";  // never for B <= 8 (it would fail to compile)
    o.piece[pieces[k]][k] = lane;
    o.has[pieces[k]] = static_cast<std::uint8_t>(o.has[pieces[k]] | (1U << k));
    ++pieces[k];
  };
  for (int i = 0; i < 8; ++i) {
    const int bit = i * 8 * B, w = bit / 64, sh = bit % 64;
    o.shift[i] = sh;
    o.spill[i] = 64 - sh;
    o.word[i] = w;
    o.next[i] = w + 1 < 8 ? w + 1 : 7;
    add(w, i);
    if (sh + 8 * B > 64) add(w + 1, 8 + i);
  }
  return o;
}

// The 64-bit lanes of a then b (16 values) joined in twos: lane k = v[2k] | v[2k+1] << kBits.
template <int kBits>
[[DTSIM_TARGET_AVX512, gnu::always_inline]] inline __m512i join_lanes(__m512i a, __m512i b) {
  const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
  return _mm512_or_si512(_mm512_permutex2var_epi64(a, even, b),
                         _mm512_slli_epi64(_mm512_permutex2var_epi64(a, odd, b), kBits));
}

// The inverse: lanes k of v split into (v[k], v[k] >> kBits), the first four lanes' halves
// into lo (in order), the last four's into hi. The decoder's fields keep whatever lies
// above them (the next fields' bits): each step reads only a field's low bits, and the
// codes' level and sign bits are picked out at the end, so no step needs a mask.
template <int kBits>
[[DTSIM_TARGET_AVX512, gnu::always_inline]] inline void split_lanes(__m512i v, __m512i& lo, __m512i& hi) {
  const __m512i high = _mm512_srli_epi64(v, kBits);
  lo = _mm512_permutex2var_epi64(v, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), high);
  hi = _mm512_permutex2var_epi64(v, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15), high);
}

// A segment's encoding constants, broadcast.
struct CodeVec {
  __m512 inv;
  __m512i key_hi, smax, sign_bit;
};

// 16 codes (codes_run's operations lane for lane); ctr = the generator's counter values.
[[DTSIM_TARGET_AVX512, gnu::always_inline]] inline __m512i codes16(__m512 v, __m512i ctr, const CodeVec& k) {
  const __m512 y = _mm512_mul_ps(_mm512_abs_ps(v), k.inv);
  const __m512i li = _mm512_cvttps_epi32(y);  // floor: y >= 0
  // y - floor(y), exact (as y - float(li) is): vreduceps with M = 0, rounding down
  const __m512 frac = _mm512_reduce_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  // detail::stream_mix, then the top 24 bits
  __m512i h = _mm512_xor_si512(ctr, _mm512_srli_epi32(ctr, 16));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(0x7FEB352D));
  h = _mm512_ternarylogic_epi32(h, _mm512_srli_epi32(h, 15), k.key_hi, 0x96);  // a ^ b ^ c
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(static_cast<int>(0x846CA68BU)));
  h = _mm512_srli_epi32(_mm512_xor_si512(h, _mm512_srli_epi32(h, 16)), 8);
  const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(h), _mm512_set1_ps(0x1.0p-24f));
  __m512i level = _mm512_mask_add_epi32(li, _mm512_cmp_ps_mask(u, frac, _CMP_LT_OQ), li, _mm512_set1_epi32(1));
  level = _mm512_min_epi32(level, k.smax);
  const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ) & _mm512_test_epi32_mask(level, level);
  return _mm512_mask_or_epi32(level, neg, level, k.sign_bit);
}

// sign * level * unit (apply_codes' decoded value) of 16 codes; bits above a code's B bits
// are ignored.
template <int B>
[[DTSIM_TARGET_AVX512, gnu::always_inline]] inline __m512 decoded16(__m512i c, __m512 unit) {
  constexpr int top = B - 1;
  const __m512 mag = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(c, _mm512_set1_epi32((1 << top) - 1))), unit);
  // mag ^ (the sign bit, moved to bit 31): -mag where it is set
  const __m512i sign = _mm512_slli_epi32(c, 31 - top), bit31 = _mm512_set1_epi32(static_cast<int>(0x80000000U));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(mag), sign, bit31, 0x78));  // a ^ (b & c)
}

// Codes of x[0..64) (counter value ctr0 at x[0]) packed into words[0 .. 2B); with
// kFeedback, x = x + (-1) * decoded afterwards (unit = the wire norm / levels).
template <int B, bool kFeedback>
[[DTSIM_TARGET_AVX512, gnu::always_inline]] inline void encode_block_avx512(float* x, __m512i ctr, const CodeVec& k,
                                                                            __m512 unit, std::uint32_t* words) {
  __m512i pairs[4];
  for (int r = 0; r < 4; ++r) {
    const __m512 v = _mm512_loadu_ps(x + 16 * r);
    const __m512i c = codes16(v, ctr, k);
    ctr = _mm512_add_epi32(ctr, _mm512_set1_epi32(static_cast<int>(16 * detail::kStreamStep)));
    if constexpr (kFeedback) {
      const __m512 d = decoded16<B>(c, unit);
      _mm512_storeu_ps(x + 16 * r, _mm512_add_ps(v, _mm512_mul_ps(_mm512_set1_ps(-1.0f), d)));
    }
    // code 2k (low half of 64-bit lane k) | code 2k+1 (high half) << B
    pairs[r] = _mm512_or_si512(_mm512_and_si512(c, _mm512_set1_epi64(0xFFFFFFFF)), _mm512_srli_epi64(c, 32 - B));
  }
  const __m512i octets =
      join_lanes<4 * B>(join_lanes<2 * B>(pairs[0], pairs[1]), join_lanes<2 * B>(pairs[2], pairs[3]));
  static constexpr OctetLayout kLay = octet_layout(B);
  const __m512i shift = _mm512_loadu_si512(kLay.shift);
  const __m512i lo = _mm512_sllv_epi64(octets, shift);
  const __m512i hi = _mm512_srlv_epi64(octets, _mm512_loadu_si512(kLay.spill));
  __m512i out = _mm512_setzero_si512();
  for (int t = 0; t < 4; ++t)
    if (kLay.has[t]) {
      const __m512i piece = _mm512_loadu_si512(kLay.piece[t]);
      out = _mm512_or_si512(out, _mm512_maskz_permutex2var_epi64(kLay.has[t], lo, piece, hi));
    }
  _mm512_mask_storeu_epi64(words, static_cast<__mmask8>((1U << B) - 1U), out);
}

// `count` blocks of one live segment (x[0] has counter value ctr0).
template <int B, bool kFeedback>
[[DTSIM_TARGET_AVX512]] inline void encode_run_avx512(float* x, std::int64_t count, std::uint32_t ctr0,
                                                      const SegmentCode& sc, std::int32_t smax, std::uint32_t* words) {
  const CodeVec k{_mm512_set1_ps(sc.inv), _mm512_set1_epi32(static_cast<int>(sc.k_hi)), _mm512_set1_epi32(smax),
                  _mm512_set1_epi32(1 << (B - 1))};
  const __m512 unit = _mm512_set1_ps(sc.unit);
  // lane l: ctr0 + l * step, then 16 steps per register
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i ctr = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(ctr0)),
                                 _mm512_mullo_epi32(lanes, _mm512_set1_epi32(static_cast<int>(detail::kStreamStep))));
  for (std::int64_t b = 0; b < count; ++b) {
    prefetch_block(x + b * kBlock + kPrefetchAhead);
    encode_block_avx512<B, kFeedback>(x + b * kBlock, ctr, k, unit, words + 2 * B * b);
    ctr = _mm512_add_epi32(ctr, _mm512_set1_epi32(static_cast<int>(kBlock * detail::kStreamStep)));
  }
}

// The 64 codes of words[0 .. 2B) applied to out[0..64) as apply_codes does.
template <int B, bool kAccumulate>
[[DTSIM_TARGET_AVX512, gnu::always_inline]] inline void decode_block_avx512(const std::uint32_t* words, __m512 u,
                                                                            __m512 w, float* out) {
  static constexpr OctetLayout kLay = octet_layout(B);
  const __m512i packed = _mm512_maskz_loadu_epi64(static_cast<__mmask8>((1U << B) - 1U), words);
  const __m512i first = _mm512_permutexvar_epi64(_mm512_loadu_si512(kLay.word), packed);
  const __m512i next = _mm512_permutexvar_epi64(_mm512_loadu_si512(kLay.next), packed);
  const __m512i octets = _mm512_or_si512(_mm512_srlv_epi64(first, _mm512_loadu_si512(kLay.shift)),
                                         _mm512_sllv_epi64(next, _mm512_loadu_si512(kLay.spill)));
  __m512i quads[2], pairs[4];
  split_lanes<4 * B>(octets, quads[0], quads[1]);
  split_lanes<2 * B>(quads[0], pairs[0], pairs[1]);
  split_lanes<2 * B>(quads[1], pairs[2], pairs[3]);
  for (int r = 0; r < 4; ++r) {
    // code 2k = pair k's low B bits (low half of lane k), code 2k+1 = its high B bits (high half)
    const __m512i c = _mm512_mask_blend_epi32(0xAAAA, pairs[r], _mm512_slli_epi64(pairs[r], 32 - B));
    const __m512 d = decoded16<B>(c, u);
    if constexpr (kAccumulate) {
      _mm512_storeu_ps(out + 16 * r, _mm512_add_ps(_mm512_loadu_ps(out + 16 * r), _mm512_mul_ps(w, d)));
    } else {
      _mm512_storeu_ps(out + 16 * r, d);
    }
  }
}

// `count` blocks of one segment.
template <int B>
[[DTSIM_TARGET_AVX512]] inline void decode_run_avx512(const std::uint32_t* words, std::int64_t count, float unit,
                                                      float weight, bool accumulate, float* out) {
  const __m512 u = _mm512_set1_ps(unit), w = _mm512_set1_ps(weight);
  if (accumulate) {
    for (std::int64_t b = 0; b < count; ++b) decode_block_avx512<B, true>(words + 2 * B * b, u, w, out + b * kBlock);
  } else {
    for (std::int64_t b = 0; b < count; ++b) decode_block_avx512<B, false>(words + 2 * B * b, u, w, out + b * kBlock);
  }
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // __x86_64__

// --- encode (and error feedback's fused encode + subtract) --------------------------------

struct EncodeArgs {
  std::int64_t n;
  const std::int64_t* offsets;
  std::int64_t L;
  const float* norms;
  const float* wire_norms;  // error feedback only
  const std::uint64_t* keys;
  int levels;
  std::uint32_t* words;
};

// `count` full blocks of one live segment, from x (its element j0) and the block's words
// on: codes, error feedback's subtraction, packing.
template <class T, int B, bool kFeedback>
[[gnu::always_inline]] inline void encode_full_blocks(T* x, std::int64_t count, std::uint32_t j0, const SegmentCode& sc,
                                                      std::int32_t smax, std::uint32_t* words) {
  alignas(64) std::uint32_t codes[kBlock];
  std::uint64_t packed[B];
  for (std::int64_t b = 0; b < count; ++b) {
    T* xb = x + b * kBlock;
    prefetch_block(xb + kPrefetchAhead);
    const auto jb = j0 + static_cast<std::uint32_t>(b * kBlock);
    codes_run(xb, static_cast<std::int32_t>(kBlock), jb, sc, smax, B - 1, codes);
    if constexpr (kFeedback) apply_codes(codes, static_cast<std::int32_t>(kBlock), sc.unit, B - 1, -1.0f, true, xb);
    pack64<B>(codes, packed);
    std::memcpy(words + 2 * B * b, packed, sizeof packed);
  }
}

// Blocks [b0, b1). With kFeedback (T = float), x is the memory, and after its codes are
// taken each element gets m = m + (-1) * decoded. kAvx512 (T = float): runs of full blocks
// go through the AVX-512 block codec when B <= 8.
template <class T, int B, bool kFeedback, bool kAvx512 = false>
[[gnu::always_inline]] inline void encode_blocks(T* x, const EncodeArgs& a, std::int64_t b0, std::int64_t b1) {
  const std::int64_t n = a.n, L = a.L;
  const std::int64_t* offsets = a.offsets;
  const std::int64_t total_words = (n * B + 31) / 32;
  const std::int32_t smax = a.levels;
  constexpr int top = B - 1;
  std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, b0 * kBlock) - offsets - 1;
  alignas(64) std::uint32_t codes[kBlock];
  std::uint64_t packed[B];
  for (std::int64_t blk = b0; blk < b1;) {
    const std::int64_t base = blk * kBlock, end = std::min(n, base + kBlock);
    while (seg < L && offsets[seg + 1] <= base) ++seg;
    const SegmentCode sc = segment_code(a.norms, a.wire_norms, a.keys, a.levels, seg);
    if (end == base + kBlock && offsets[seg + 1] >= end && sc.live) {
      // full blocks of this live segment up to its end: fixed-width vector loops
      const std::int64_t run = std::min(b1, offsets[seg + 1] / kBlock) - blk;
      const auto j0 = static_cast<std::uint32_t>(base - offsets[seg]);
      std::uint32_t* words = a.words + 2 * B * blk;
#if defined(__x86_64__)
      if constexpr (kAvx512 && B <= 8) {
        encode_run_avx512<B, kFeedback>(x + base, run, j0 * detail::kStreamStep + sc.k_lo, sc, smax, words);
      } else {
        encode_full_blocks<T, B, kFeedback>(x + base, run, j0, sc, smax, words);
      }
#else
      encode_full_blocks<T, B, kFeedback>(x + base, run, j0, sc, smax, words);
#endif
      blk += run;
      continue;
    }
    // a block with segment boundaries, a dead segment, or the buffer's tail
    std::fill(codes, codes + kBlock, 0U);
    for (std::int64_t s = seg; s < L && offsets[s] < end; ++s) {
      const std::int64_t lo = std::max(offsets[s], base), hi = std::min(offsets[s + 1], end);
      if (hi <= lo) continue;
      const SegmentCode here = segment_code(a.norms, a.wire_norms, a.keys, a.levels, s);
      const auto m = static_cast<std::int32_t>(hi - lo);
      if (here.live)
        codes_run(x + lo, m, static_cast<std::uint32_t>(lo - offsets[s]), here, smax, top, codes + (lo - base));
      if constexpr (kFeedback) apply_codes(codes + (lo - base), m, here.unit, top, -1.0f, true, x + lo);
    }
    pack64<B>(codes, packed);
    const std::int64_t w0 = 2 * B * blk;
    const std::int64_t nw = std::min<std::int64_t>(2 * B, total_words - w0);
    std::memcpy(a.words + w0, packed, static_cast<std::size_t>(nw) * 4);
    ++blk;
  }
}

template <class T, int B, bool kFeedback>
void encode_blocks_base(T* x, const EncodeArgs& a, std::int64_t b0, std::int64_t b1) {
  encode_blocks<T, B, kFeedback>(x, a, b0, b1);
}
#if defined(__x86_64__)
template <int B, bool kFeedback>
[[DTSIM_TARGET_AVX2]] void encode_blocks_avx2(float* x, const EncodeArgs& a, std::int64_t b0, std::int64_t b1) {
  encode_blocks<float, B, kFeedback>(x, a, b0, b1);
}
// flatten: the block codec (an AVX-512 function, which the portable template may not
// force-inline) is inlined here.
template <int B, bool kFeedback>
[[DTSIM_TARGET_AVX512, gnu::flatten]] void encode_blocks_avx512(float* x, const EncodeArgs& a, std::int64_t b0,
                                                                std::int64_t b1) {
  encode_blocks<float, B, kFeedback, true>(x, a, b0, b1);
}
#endif

template <class T, bool kFeedback>
void encode(T* x, const EncodeArgs& a) {
  const int bits = qsgd_code_bits(a.levels);
  const std::int64_t blocks = (a.n + kBlock - 1) / kBlock;
  auto run = [&](auto b_tag) {
    constexpr int B = decltype(b_tag)::value;
    at::parallel_for(0, blocks, 256, [&](std::int64_t b0, std::int64_t b1) {
#if defined(__x86_64__)
      if constexpr (std::is_same_v<T, float>) {
        if (has_avx512()) return encode_blocks_avx512<B, kFeedback>(x, a, b0, b1);
        if (has_avx2()) return encode_blocks_avx2<B, kFeedback>(x, a, b0, b1);
      }
#endif
      encode_blocks_base<T, B, kFeedback>(x, a, b0, b1);
    });
  };
  switch (bits) {
    case 3: return run(std::integral_constant<int, 3>{});
    case 4: return run(std::integral_constant<int, 4>{});
    case 5: return run(std::integral_constant<int, 5>{});
    case 6: return run(std::integral_constant<int, 6>{});
    case 7: return run(std::integral_constant<int, 7>{});
    case 8: return run(std::integral_constant<int, 8>{});
    case 9: return run(std::integral_constant<int, 9>{});
    default: return run(std::integral_constant<int, 10>{});
  }
}

// --- decode -----------------------------------------------------------------------------

// Blocks [b0, b1). kAvx512 (T = float): runs of full blocks of one segment go through the
// AVX-512 block codec when B <= 8.
template <class T, int B, bool kAvx512 = false>
[[gnu::always_inline]] inline void decode_blocks(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets,
                                                 std::int64_t L, const float* wire_norms, int levels, float weight,
                                                 bool accumulate, T* out, std::int64_t b0, std::int64_t b1) {
  const std::int64_t total_words = (n * B + 31) / 32;
  constexpr int top = B - 1;
  std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, b0 * kBlock) - offsets - 1;
  alignas(64) std::uint32_t codes[kBlock];
  std::uint64_t packed[B];
  for (std::int64_t blk = b0; blk < b1;) {
    const std::int64_t base = blk * kBlock, end = std::min(n, base + kBlock);
    while (seg < L && offsets[seg + 1] <= base) ++seg;
    const std::int64_t w0 = 2 * B * blk;
    if (end == base + kBlock && offsets[seg + 1] >= end) {
      // full blocks of this segment up to its end
      const std::int64_t run = std::min(b1, offsets[seg + 1] / kBlock) - blk;
      const float unit = wire_norms[seg] / static_cast<float>(levels);
#if defined(__x86_64__)
      if constexpr (kAvx512 && B <= 8) {
        decode_run_avx512<B>(words + w0, run, unit, weight, accumulate, out + base);
        blk += run;
        continue;
      }
#endif
      for (std::int64_t b = 0; b < run; ++b) {
        std::memcpy(packed, words + w0 + 2 * B * b, sizeof packed);
        unpack64<B>(packed, codes);
        apply_codes(codes, static_cast<std::int32_t>(kBlock), unit, top, weight, accumulate, out + base + b * kBlock);
      }
      blk += run;
      continue;
    }
    const std::int64_t nw = std::min<std::int64_t>(2 * B, total_words - w0);
    if (nw < 2 * B) std::memset(packed, 0, sizeof packed);
    std::memcpy(packed, words + w0, static_cast<std::size_t>(nw) * 4);
    unpack64<B>(packed, codes);
    for (std::int64_t s = seg; s < L && offsets[s] < end; ++s) {
      const std::int64_t lo = std::max(offsets[s], base), hi = std::min(offsets[s + 1], end);
      if (hi <= lo) continue;
      apply_codes(codes + (lo - base), static_cast<std::int32_t>(hi - lo), wire_norms[s] / static_cast<float>(levels),
                  top, weight, accumulate, out + lo);
    }
    ++blk;
  }
}

template <class T, int B>
void decode_blocks_base(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                        const float* wire_norms, int levels, float weight, bool accumulate, T* out, std::int64_t b0,
                        std::int64_t b1) {
  decode_blocks<T, B>(words, n, offsets, L, wire_norms, levels, weight, accumulate, out, b0, b1);
}
#if defined(__x86_64__)
template <int B>
[[DTSIM_TARGET_AVX2]] void decode_blocks_avx2(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets,
                                              std::int64_t L, const float* wire_norms, int levels, float weight,
                                              bool accumulate, float* out, std::int64_t b0, std::int64_t b1) {
  decode_blocks<float, B>(words, n, offsets, L, wire_norms, levels, weight, accumulate, out, b0, b1);
}
template <int B>
[[DTSIM_TARGET_AVX512, gnu::flatten]] void decode_blocks_avx512(const std::uint32_t* words, std::int64_t n,
                                                                const std::int64_t* offsets, std::int64_t L,
                                                                const float* wire_norms, int levels, float weight,
                                                                bool accumulate, float* out, std::int64_t b0,
                                                                std::int64_t b1) {
  decode_blocks<float, B, true>(words, n, offsets, L, wire_norms, levels, weight, accumulate, out, b0, b1);
}
#endif

}  // namespace

int qsgd_code_bits(int levels) { return 1 + static_cast<int>(std::bit_width(static_cast<unsigned>(levels))); }

template <class T>
void sum_squares_partials(const T* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                          const std::int64_t* slot_begin, float* partials) {
  sumsq_dispatch<T>(x, nullptr, n, offsets, L, slot_begin, partials);
}

void add_sum_squares_partials(float* m, const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                              const std::int64_t* slot_begin, float* partials) {
  sumsq_dispatch<float>(x, m, n, offsets, L, slot_begin, partials);
}

template <class T>
void qsgd_encode(const T* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L, const float* norms,
                 const std::uint64_t* keys, int levels, std::uint32_t* words) {
  encode<T, false>(const_cast<T*>(x), EncodeArgs{n, offsets, L, norms, nullptr, keys, levels, words});
}

void qsgd_encode_feedback(float* m, std::int64_t n, const std::int64_t* offsets, std::int64_t L, const float* norms,
                          const float* wire_norms, const std::uint64_t* keys, int levels, std::uint32_t* words) {
  encode<float, true>(m, EncodeArgs{n, offsets, L, norms, wire_norms, keys, levels, words});
}

template <class T>
void qsgd_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                 const float* wire_norms, int levels, float weight, bool accumulate, T* out) {
  const int bits = qsgd_code_bits(levels);
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  auto run = [&](auto b_tag) {
    constexpr int B = decltype(b_tag)::value;
    at::parallel_for(0, blocks, 256, [&](std::int64_t b0, std::int64_t b1) {
#if defined(__x86_64__)
      if constexpr (std::is_same_v<T, float>) {
        if (has_avx512())
          return decode_blocks_avx512<B>(words, n, offsets, L, wire_norms, levels, weight, accumulate, out, b0, b1);
        if (has_avx2())
          return decode_blocks_avx2<B>(words, n, offsets, L, wire_norms, levels, weight, accumulate, out, b0, b1);
      }
#endif
      decode_blocks_base<T, B>(words, n, offsets, L, wire_norms, levels, weight, accumulate, out, b0, b1);
    });
  };
  switch (bits) {
    case 3: return run(std::integral_constant<int, 3>{});
    case 4: return run(std::integral_constant<int, 4>{});
    case 5: return run(std::integral_constant<int, 5>{});
    case 6: return run(std::integral_constant<int, 6>{});
    case 7: return run(std::integral_constant<int, 7>{});
    case 8: return run(std::integral_constant<int, 8>{});
    case 9: return run(std::integral_constant<int, 9>{});
    default: return run(std::integral_constant<int, 10>{});
  }
}

#define DTSIM_QSGD_INSTANTIATE(T)                                                                                 \
  template void sum_squares_partials<T>(const T*, std::int64_t, const std::int64_t*, std::int64_t,                \
                                        const std::int64_t*, float*);                                             \
  template void qsgd_encode<T>(const T*, std::int64_t, const std::int64_t*, std::int64_t, const float*,           \
                               const std::uint64_t*, int, std::uint32_t*);                                        \
  template void qsgd_decode<T>(const std::uint32_t*, std::int64_t, const std::int64_t*, std::int64_t, const float*, \
                               int, float, bool, T*);
DTSIM_QSGD_INSTANTIATE(float)
DTSIM_QSGD_INSTANTIATE(c10::Half)
DTSIM_QSGD_INSTANTIATE(c10::BFloat16)
#undef DTSIM_QSGD_INSTANTIATE

}  // namespace dtsim::kernels::cpu
