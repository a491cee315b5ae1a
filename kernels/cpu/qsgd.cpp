#include "kernels/cpu/qsgd.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/cpu/common.hpp"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels::cpu {

namespace {

constexpr std::int64_t kBlock = 64;  // elements per packing block: 64 * bits = `bits` 64-bit words

inline float fold32(float* acc) {
  for (int off = 16; off >= 1; off /= 2)
    for (int l = 0; l < off; ++l) acc[l] += acc[l + off];
  return acc[0];
}

template <class T>
[[gnu::always_inline]] inline float full_chunk_sumsq(const T* x) {
  float acc[32] = {};
  for (int r = 0; r < 32; ++r)
    for (int l = 0; l < 32; ++l) {
      const float v = to_float(x[32 * r + l]);
      acc[l] += v * v;
    }
  return fold32(acc);
}
#if defined(__x86_64__)
[[gnu::target("avx2,fma,f16c,bmi2")]] float full_chunk_sumsq_avx2(const float* x) { return full_chunk_sumsq(x); }
#endif
float full_chunk_sumsq_base(const float* x) { return full_chunk_sumsq(x); }

// Codes of elements [lo, hi) of one segment, written to codes[i - block_base].
template <class T>
[[gnu::always_inline]] inline void codes_range(const T* x, std::int64_t lo, std::int64_t hi, std::int64_t seg_begin,
                                               float norm, std::uint64_t key, int levels, int bits,
                                               std::int64_t block_base, std::uint32_t* codes) {
  if (!(norm > 0.0f) || !std::isfinite(norm)) {
    for (std::int64_t i = lo; i < hi; ++i) codes[i - block_base] = 0;
    return;
  }
  const float inv = static_cast<float>(levels) / norm;
  const std::int32_t smax = levels;
  const int top = bits - 1;
  const std::uint32_t k_lo = static_cast<std::uint32_t>(key), k_hi = static_cast<std::uint32_t>(key >> 32);
  const std::uint32_t j0 = static_cast<std::uint32_t>(lo - seg_begin);
  const T* xs = x + lo;
  std::uint32_t* out = codes + (lo - block_base);
  const std::int32_t m = static_cast<std::int32_t>(hi - lo);
  // Branch-free, 32-bit lanes throughout, so that the loop vectorizes (8 lanes with AVX2).
  for (std::int32_t j = 0; j < m; ++j) {
    const float v = to_float(xs[j]);
    const float y = std::fabs(v) * inv;
    const std::int32_t li = static_cast<std::int32_t>(y);  // floor: y >= 0 (and <= s + 1)
    const float fl = static_cast<float>(li);
    const std::uint32_t h = detail::hash32(detail::hash32((j0 + static_cast<std::uint32_t>(j)) * 0x9E3779B9U + k_lo) ^ k_hi);
    const float u = static_cast<float>(static_cast<std::int32_t>(h >> 8)) * 0x1.0p-24f;
    std::int32_t level = li + static_cast<std::int32_t>(u < y - fl);
    level = level < smax ? level : smax;
    const std::int32_t neg = static_cast<std::int32_t>(v < 0.0f) & static_cast<std::int32_t>(level > 0);
    out[j] = static_cast<std::uint32_t>(level | (neg << top));
  }
}
#if defined(__x86_64__)
[[gnu::target("avx2,fma,f16c,bmi2")]] void codes_range_avx2(const float* x, std::int64_t lo, std::int64_t hi,
                                                             std::int64_t seg_begin, float norm, std::uint64_t key,
                                                             int levels, int bits, std::int64_t block_base,
                                                             std::uint32_t* codes) {
  codes_range(x, lo, hi, seg_begin, norm, key, levels, bits, block_base, codes);
}
#endif

// Packs 64 codes of `bits` bits into `bits` 64-bit words.
inline void pack_block(const std::uint32_t* codes, int bits, std::uint64_t* out) {
  std::uint64_t acc = 0;
  int fill = 0, k = 0;
  for (int j = 0; j < kBlock; ++j) {
    const std::uint64_t c = codes[j];
    acc |= c << fill;
    fill += bits;
    if (fill >= 64) {
      out[k++] = acc;
      fill -= 64;
      acc = fill > 0 ? c >> (bits - fill) : 0;
    }
  }
}

}  // namespace

int qsgd_code_bits(int levels) { return 1 + static_cast<int>(std::bit_width(static_cast<unsigned>(levels))); }

template <class T>
void sum_squares_partials(const T* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                          const std::int64_t* slot_begin, float* partials) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  const bool avx2 = has_avx2();
  at::parallel_for(0, chunks, 64, [&](std::int64_t c0, std::int64_t c1) {
    std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, c0 * kChunk) - offsets - 1;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t base = c * kChunk, end = std::min(n, base + kChunk);
      while (seg < L && offsets[seg + 1] <= base) ++seg;
      if (end == base + kChunk && offsets[seg] <= base && offsets[seg + 1] >= end) {
        float p;
        if constexpr (std::is_same_v<T, float>) {
#if defined(__x86_64__)
          p = avx2 ? full_chunk_sumsq_avx2(x + base) : full_chunk_sumsq_base(x + base);
#else
          p = full_chunk_sumsq_base(x + base);
#endif
        } else {
          (void)avx2;
          p = full_chunk_sumsq(x + base);
        }
        partials[slot_begin[seg] + c - offsets[seg] / kChunk] = p;
        continue;
      }
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
  });
}

template <class T>
void qsgd_encode(const T* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L, const float* norms,
                 const std::uint64_t* keys, int levels, std::uint32_t* words) {
  const int bits = qsgd_code_bits(levels);
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  const std::int64_t total_words = (n * bits + 31) / 32;
  const bool avx2 = has_avx2();
  at::parallel_for(0, blocks, 256, [&](std::int64_t b0, std::int64_t b1) {
    std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, b0 * kBlock) - offsets - 1;
    std::uint32_t codes[kBlock];
    std::uint64_t packed[16];
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t base = blk * kBlock, end = std::min(n, base + kBlock);
      while (seg < L && offsets[seg + 1] <= base) ++seg;
      std::fill(codes, codes + kBlock, 0U);
      for (std::int64_t s = seg; s < L && offsets[s] < end; ++s) {
        const std::int64_t lo = std::max(offsets[s], base), hi = std::min(offsets[s + 1], end);
        if (hi <= lo) continue;
        if constexpr (std::is_same_v<T, float>) {
#if defined(__x86_64__)
          if (avx2) {
            codes_range_avx2(x, lo, hi, offsets[s], norms[s], keys[s], levels, bits, base, codes);
            continue;
          }
#endif
        }
        codes_range(x, lo, hi, offsets[s], norms[s], keys[s], levels, bits, base, codes);
      }
      pack_block(codes, bits, packed);
      // Block blk owns 32-bit words [2 * bits * blk, 2 * bits * (blk + 1)); the last block
      // stops at the stream's end.
      const std::int64_t w0 = 2 * bits * blk;
      const std::int64_t nw = std::min<std::int64_t>(2 * bits, total_words - w0);
      std::memcpy(words + w0, packed, static_cast<std::size_t>(nw) * 4);
    }
  });
  (void)avx2;
}

template <class T>
void qsgd_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                 const float* wire_norms, int levels, float weight, bool accumulate, T* out) {
  const int bits = qsgd_code_bits(levels);
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  const std::int64_t total_words = (n * bits + 31) / 32;
  const std::uint32_t lmask = (1U << (bits - 1)) - 1U;
  at::parallel_for(0, blocks, 256, [&](std::int64_t b0, std::int64_t b1) {
    std::int64_t seg = std::upper_bound(offsets, offsets + L + 1, b0 * kBlock) - offsets - 1;
    std::uint64_t packed[17];
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t base = blk * kBlock, end = std::min(n, base + kBlock);
      while (seg < L && offsets[seg + 1] <= base) ++seg;
      const std::int64_t w0 = 2 * bits * blk;
      const std::int64_t nw = std::min<std::int64_t>(2 * bits, total_words - w0);
      packed[bits] = 0;
      std::memset(packed, 0, sizeof(std::uint64_t) * static_cast<std::size_t>(bits));
      std::memcpy(packed, words + w0, static_cast<std::size_t>(nw) * 4);
      for (std::int64_t s = seg; s < L && offsets[s] < end; ++s) {
        const std::int64_t lo = std::max(offsets[s], base), hi = std::min(offsets[s + 1], end);
        if (hi <= lo) continue;
        const float unit = wire_norms[s] / static_cast<float>(levels);
        for (std::int64_t i = lo; i < hi; ++i) {
          const std::int64_t bit = (i - base) * bits;
          const int sh = static_cast<int>(bit & 63);
          std::uint64_t word = packed[bit >> 6] >> sh;
          if (sh + bits > 64) word |= packed[(bit >> 6) + 1] << (64 - sh);
          const std::uint32_t code = static_cast<std::uint32_t>(word);
          const float mag = static_cast<float>(code & lmask) * unit;
          const float v = (code >> (bits - 1)) & 1U ? -mag : mag;
          out[i] = accumulate ? static_cast<T>(to_float(out[i]) + weight * v) : static_cast<T>(v);
        }
      }
    }
  });
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
