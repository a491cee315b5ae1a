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

namespace dtsim::kernels::cpu {

namespace {

// Elements per packing block: 64 codes of B bits fill exactly B 64-bit words (2B 32-bit
// words of the stream), so blocks are independent and parallel.
constexpr std::int64_t kBlock = 64;

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

// Partials of one chunk that is the buffer's tail or holds segment boundaries.
template <class T>
void boundary_chunk_sumsq(const T* x, std::int64_t n, std::int64_t c, const std::int64_t* offsets, std::int64_t L,
                          std::int64_t seg, const std::int64_t* slot_begin, float* partials) {
  const std::int64_t base = c * kChunk, end = std::min(n, base + kChunk);
  for (std::int64_t s = seg; s < L && offsets[s] < end; ++s) {
    const std::int64_t a = std::max(offsets[s], base), b = std::min(offsets[s + 1], end);
    if (b <= a) continue;
    float acc[32] = {};
    for (int r = 0; r < 32; ++r)
      for (int l = 0; l < 32; ++l) {
        const std::int64_t i = base + 32 * r + l;
        const float v = (i >= a && i < b) ? to_float(x[i]) : 0.0f;
        acc[l] += v * v;
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
// of the segment. Branch-free with 32-bit lanes, so that it vectorizes (the hash's four
// 32-bit multiplies per element are the bulk of the work).
template <class T>
[[gnu::always_inline]] inline void codes_run(const T* __restrict xs, std::int32_t m, std::uint32_t j0,
                                             const SegmentCode& sc, std::int32_t smax, int top,
                                             std::uint32_t* __restrict out) {
  const float inv = sc.inv;
  const std::uint32_t k_hi = sc.k_hi;
  // the hash input (j0 + j) * 0x9E3779B9 + k_lo (mod 2^32), as an induction variable
  const std::uint32_t h0 = j0 * 0x9E3779B9U + sc.k_lo;
  for (std::int32_t j = 0; j < m; ++j) {
    const float v = to_float(xs[j]);
    const float y = std::fabs(v) * inv;
    const std::int32_t li = static_cast<std::int32_t>(y);  // floor: y >= 0 (and <= s + 1)
    const float fl = static_cast<float>(li);
    const std::uint32_t h = detail::hash32(detail::hash32(h0 + static_cast<std::uint32_t>(j) * 0x9E3779B9U) ^ k_hi);
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

// Blocks [b0, b1). With kFeedback (T = float), x is the memory, and after its codes are
// taken each element gets m = m + (-1) * decoded.
template <class T, int B, bool kFeedback>
[[gnu::always_inline]] inline void encode_blocks(T* x, const EncodeArgs& a, std::int64_t b0, std::int64_t b1) {
  const std::int64_t n = a.n, L = a.L;
  const std::int64_t* offsets = a.offsets;
  const std::int64_t total_words = (n * B + 31) / 32;
  const std::int32_t smax = a.levels;
  constexpr int top = B - 1;
  std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, b0 * kBlock) - offsets - 1;
  while (seg < L && offsets[seg + 1] <= b0 * kBlock) ++seg;
  SegmentCode sc{};
  std::int64_t sc_of = -1;
  alignas(64) std::uint32_t codes[kBlock];
  std::uint64_t packed[B];
  for (std::int64_t blk = b0; blk < b1; ++blk) {
    const std::int64_t base = blk * kBlock, end = std::min(n, base + kBlock);
    while (seg < L && offsets[seg + 1] <= base) ++seg;
    if (sc_of != seg && seg < L) {
      sc = segment_code(a.norms, a.wire_norms, a.keys, a.levels, seg);
      sc_of = seg;
    }
    if (end == base + kBlock && offsets[seg + 1] >= end && sc.live) {
      // the whole block in one live segment: fixed-width vector loops
      const auto j0 = static_cast<std::uint32_t>(base - offsets[seg]);
      codes_run(x + base, static_cast<std::int32_t>(kBlock), j0, sc, smax, top, codes);
      if constexpr (kFeedback) apply_codes(codes, static_cast<std::int32_t>(kBlock), sc.unit, top, -1.0f, true, x + base);
    } else {
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
    }
    pack64<B>(codes, packed);
    const std::int64_t w0 = 2 * B * blk;
    const std::int64_t nw = std::min<std::int64_t>(2 * B, total_words - w0);
    std::memcpy(a.words + w0, packed, static_cast<std::size_t>(nw) * 4);
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
template <int B, bool kFeedback>
[[DTSIM_TARGET_AVX512]] void encode_blocks_avx512(float* x, const EncodeArgs& a, std::int64_t b0, std::int64_t b1) {
  encode_blocks<float, B, kFeedback>(x, a, b0, b1);
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

template <class T, int B>
[[gnu::always_inline]] inline void decode_blocks(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets,
                                                 std::int64_t L, const float* wire_norms, int levels, float weight,
                                                 bool accumulate, T* out, std::int64_t b0, std::int64_t b1) {
  const std::int64_t total_words = (n * B + 31) / 32;
  constexpr int top = B - 1;
  std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, b0 * kBlock) - offsets - 1;
  alignas(64) std::uint32_t codes[kBlock];
  std::uint64_t packed[B];
  for (std::int64_t blk = b0; blk < b1; ++blk) {
    const std::int64_t base = blk * kBlock, end = std::min(n, base + kBlock);
    while (seg < L && offsets[seg + 1] <= base) ++seg;
    const std::int64_t w0 = 2 * B * blk;
    const std::int64_t nw = std::min<std::int64_t>(2 * B, total_words - w0);
    if (nw < 2 * B) std::memset(packed, 0, sizeof packed);
    std::memcpy(packed, words + w0, static_cast<std::size_t>(nw) * 4);
    unpack64<B>(packed, codes);
    if (end == base + kBlock && offsets[seg + 1] >= end) {
      apply_codes(codes, static_cast<std::int32_t>(kBlock), wire_norms[seg] / static_cast<float>(levels), top, weight,
                  accumulate, out + base);
      continue;
    }
    for (std::int64_t s = seg; s < L && offsets[s] < end; ++s) {
      const std::int64_t lo = std::max(offsets[s], base), hi = std::min(offsets[s + 1], end);
      if (hi <= lo) continue;
      apply_codes(codes + (lo - base), static_cast<std::int32_t>(hi - lo), wire_norms[s] / static_cast<float>(levels),
                  top, weight, accumulate, out + lo);
    }
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
[[DTSIM_TARGET_AVX512]] void decode_blocks_avx512(const std::uint32_t* words, std::int64_t n,
                                                  const std::int64_t* offsets, std::int64_t L, const float* wire_norms,
                                                  int levels, float weight, bool accumulate, float* out,
                                                  std::int64_t b0, std::int64_t b1) {
  decode_blocks<float, B>(words, n, offsets, L, wire_norms, levels, weight, accumulate, out, b0, b1);
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
