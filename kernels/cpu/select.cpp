#include "kernels/cpu/select.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>

#include "kernels/cpu/common.hpp"
#include "kernels/detail/hash.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dtsim::kernels::cpu {

namespace {

// Radix digits of a 31-bit magnitude key: bits 30..20, 19..9, 8..0.
constexpr int kBins = 2048;
constexpr int kShift[3] = {20, 9, 0};
constexpr std::uint32_t kMask[3] = {0x7FF, 0x7FF, 0x1FF};

// Splits [0, n) into parts of at least `min_part` elements, at most one per thread.
std::int64_t part_count(std::int64_t n, std::int64_t min_part) {
  const std::int64_t threads = at::in_parallel_region() ? 1 : at::get_num_threads();
  return std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n / min_part));
}
inline std::int64_t part_begin(std::int64_t n, std::int64_t parts, std::int64_t p) { return n * p / parts; }

template <class T>
[[gnu::always_inline]] inline void histogram_top(const T* x, std::int64_t a, std::int64_t b, std::uint32_t* h) {
  // Four interleaved tables, so that runs of equal digits do not serialize on one counter.
  std::uint32_t* h0 = h;
  std::uint32_t* h1 = h + kBins;
  std::uint32_t* h2 = h + 2 * kBins;
  std::uint32_t* h3 = h + 3 * kBins;
  std::int64_t i = a;
  for (; i + 4 <= b; i += 4) {
    ++h0[mag_key(x[i]) >> kShift[0]];
    ++h1[mag_key(x[i + 1]) >> kShift[0]];
    ++h2[mag_key(x[i + 2]) >> kShift[0]];
    ++h3[mag_key(x[i + 3]) >> kShift[0]];
  }
  for (; i < b; ++i) ++h0[mag_key(x[i]) >> kShift[0]];
  for (int j = 0; j < kBins; ++j) h0[j] += h1[j] + h2[j] + h3[j];
}

// Indices i in [a, b) with mag_key(x[i]) >= lo, appended at out; returns how many.
// Writes nothing past them.
template <class T>
std::int64_t compact_generic(const T* x, std::int64_t a, std::int64_t b, std::uint32_t lo, std::uint32_t* out,
                             std::uint32_t* keys) {
  std::int64_t m = 0;
  for (std::int64_t i = a; i < b; ++i) {
    const std::uint32_t key = mag_key(x[i]);
    if (key >= lo) {
      keys[m] = key;
      out[m++] = static_cast<std::uint32_t>(i);
    }
  }
  return m;
}

#if defined(__x86_64__)
// permutation that moves the set lanes of an 8-bit mask to the front
const std::array<std::array<std::uint32_t, 8>, 256> kCompressLut = [] {
  std::array<std::array<std::uint32_t, 8>, 256> lut{};
  for (int m = 0; m < 256; ++m) {
    int j = 0;
    for (int l = 0; l < 8; ++l)
      if (m & (1 << l)) lut[m][j++] = static_cast<std::uint32_t>(l);
    for (; j < 8; ++j) lut[m][j] = 0;
  }
  return lut;
}();

// The same with AVX2 (8 lanes, compare + movemask + a permutation table). Each step
// stores 8 slots, so it runs only while out[0..cap) has room for them.
[[gnu::target("avx2,fma,f16c,bmi2")]] std::int64_t compact_avx2(const float* x, std::int64_t a, std::int64_t b,
                                                                 std::uint32_t lo, std::uint32_t* out,
                                                                 std::uint32_t* keys, std::int64_t cap) {
  const __m256i absmask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i thr = _mm256_set1_epi32(static_cast<int>(lo) - 1);  // keys and lo are < 2^31
  const __m256i step = _mm256_set1_epi32(8);
  __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(a)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  std::int64_t m = 0, i = a;
  if (lo == 0) return compact_generic(x, a, b, lo, out, keys);
  for (; i + 8 <= b && m + 8 <= cap; i += 8) {
    const __m256i k = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), absmask);
    const unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(k, thr))));
    const __m256i perm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kCompressLut[mask].data()));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + m), _mm256_permutevar8x32_epi32(idx, perm));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(keys + m), _mm256_permutevar8x32_epi32(k, perm));
    m += std::popcount(mask);
    idx = _mm256_add_epi32(idx, step);
  }
  return m + compact_generic(x, i, b, lo, out + m, keys + m);
}
#endif

// out has room for exactly cap indices (the count of the range).
template <class T>
std::int64_t compact(const T* x, std::int64_t a, std::int64_t b, std::uint32_t lo, std::uint32_t* out,
                     std::uint32_t* keys, std::int64_t cap) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float>) {
    if (has_avx2()) return compact_avx2(x, a, b, lo, out, keys, cap);
  }
#endif
  (void)cap;
  return compact_generic(x, a, b, lo, out, keys);
}

// Top bin (from the top) at which the running count reaches `want`; *above = count strictly above it.
int find_bin(const std::uint32_t* h, int bins, std::int64_t want, std::int64_t* above) {
  std::int64_t cum = 0;
  for (int b = bins - 1; b >= 0; --b) {
    if (cum + h[b] >= want) {
      *above = cum;
      return b;
    }
    cum += h[b];
  }
  *above = cum;
  return 0;
}

// Up to this size the radix select's fixed cost (clearing and scanning 2048-bin tables,
// tens of KB) outweighs the input: a model's biases and norms have 16 to 64 elements.
// (Measured on ResNet-20's 59 tensors, per-tensor top-1 %: 228 us with the radix select
// throughout, 164 us with this path up to 1024 elements, no better at 2048, worse at 4096.)
constexpr std::int64_t kSmallTopK = 1024;

// Top-k of a small input: the k-th largest key by nth_element on a copy of the keys, then
// one pass in index order taking the keys above it and the first ones equal to it (the
// tie rule): the same set, in the same order, as the radix path.
template <class T>
void top_k_small(const T* x, std::int64_t n, std::int64_t k, SelectWorkspace& ws, std::uint32_t* idx, T* val) {
  if (static_cast<std::int64_t>(ws.candidate_keys.size()) < kSmallTopK) ws.candidate_keys.resize(kSmallTopK);
  std::uint32_t* keys = ws.candidate_keys.data();
  for (std::int64_t i = 0; i < n; ++i) keys[i] = mag_key(x[i]);
  std::nth_element(keys, keys + (k - 1), keys + n, std::greater<>());
  const std::uint32_t kth = keys[k - 1];
  std::int64_t need = k;  // minus the keys above kth: the ones equal to it to take
  for (std::int64_t i = 0; i < n; ++i) need -= mag_key(x[i]) > kth;
  std::int64_t out = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t key = mag_key(x[i]);
    if (key > kth || (key == kth && need-- > 0)) {
      idx[out] = static_cast<std::uint32_t>(i);
      val[out] = x[i];
      ++out;
    }
  }
}

// Elements of x[a, b) whose key is >= lo.
template <class T>
[[gnu::always_inline]] inline std::int64_t count_at_least(const T* x, std::int64_t a, std::int64_t b,
                                                          std::uint32_t lo) {
  std::int64_t c = 0;
  for (std::int64_t i = a; i < b; ++i) c += mag_key(x[i]) >= lo;
  return c;
}
#if defined(__x86_64__)
[[DTSIM_TARGET_AVX2]] std::int64_t count_at_least_avx2(const float* x, std::int64_t a, std::int64_t b,
                                                       std::uint32_t lo) {
  const __m256i absmask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i thr = _mm256_set1_epi32(static_cast<int>(lo) - 1);  // keys and lo are < 2^31
  std::int64_t c = 0, i = a;
  while (i + 16 <= b) {
    // 32-bit lane counters (a compare gives -1), flushed every 2^20 elements.
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    const std::int64_t stop = std::min(b, i + (std::int64_t{1} << 20));
    for (; i + 16 <= stop; i += 16) {
      const __m256i k0 = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), absmask);
      const __m256i k1 = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8)), absmask);
      acc0 = _mm256_sub_epi32(acc0, _mm256_cmpgt_epi32(k0, thr));
      acc1 = _mm256_sub_epi32(acc1, _mm256_cmpgt_epi32(k1, thr));
    }
    alignas(32) std::uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi32(acc0, acc1));
    for (std::uint32_t l : lanes) c += l;
  }
  return c + count_at_least(x, i, b, lo);
}
#endif
template <class T>
std::int64_t count_keys_at_least(const T* x, std::int64_t a, std::int64_t b, std::uint32_t lo) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float>) {
    if (has_avx2()) return count_at_least_avx2(x, a, b, lo);
  }
#endif
  return count_at_least(x, a, b, lo);
}

// From this size, with k <= n / 8, top-k picks its first digit from a sample.
constexpr std::int64_t kSampledTopK = 4096;

// A top digit that at least k keys reach, from a sample of the keys (n / 64 of them, 1 K
// to 16 K, in runs of 16 consecutive keys spread evenly: one cache line per run, where
// single keys would cost a miss each): the digit at which the sample's count from the top
// reaches its share of k plus four standard deviations and 8. Usually a digit or two below
// the k-th key's, so a few percent of the keys reach it.
template <class T>
int sampled_top_digit(const T* x, std::int64_t n, std::int64_t k) {
  constexpr std::int64_t kRun = 16;
  const std::int64_t runs = std::clamp<std::int64_t>(n / 64, 1024, 16384) / kRun;
  const std::int64_t samples = runs * kRun;
  std::uint32_t h[kBins] = {};
  for (std::int64_t r = 0; r < runs; ++r) {
    const T* run = x + r * (n - kRun) / runs;  // n >= kSampledTopK > kRun * runs / 64
    for (std::int64_t j = 0; j < kRun; ++j) ++h[mag_key(run[j]) >> kShift[0]];
  }
  const double expected = static_cast<double>(k) * static_cast<double>(samples) / static_cast<double>(n);
  const auto want = std::min<std::int64_t>(samples, static_cast<std::int64_t>(expected + 4.0 * std::sqrt(expected) + 8));
  std::int64_t above = 0;
  return find_bin(h, kBins, want, &above);
}

}  // namespace

template <class T>
void top_k(const T* x, std::int64_t n, std::int64_t k, SelectWorkspace& ws, std::uint32_t* idx, T* val) {
  if (k <= 0) return;
  if (k >= n) {
    for (std::int64_t i = 0; i < n; ++i) {
      idx[i] = static_cast<std::uint32_t>(i);
      val[i] = x[i];
    }
    return;
  }
  if (n <= kSmallTopK) return top_k_small(x, n, k, ws, idx, val);
  const std::int64_t parts = part_count(n, 1 << 16);
  if (static_cast<std::int64_t>(ws.part_counts.size()) < parts + 1) ws.part_counts.resize(parts + 1);
  ws.part_counts[0] = 0;

  // 1. A top digit b0 that at least k keys reach (the candidates are the keys of top digit
  //    >= b0), and part_counts: the running count of candidates per part.
  //    When k is a small fraction of n (as sparsifiers use it), a sample of the keys picks
  //    b0 a little below the k-th key's digit and one vectorized pass counts the candidates:
  //    a histogram of every key, whose increments serialize on the few digits randn-like
  //    data fill, costs several read passes. Should the sample mislead (fewer than k keys
  //    reach its digit), the full histogram decides.
  int b0 = -1;
  if (n >= kSampledTopK && 8 * k <= n) {
    b0 = sampled_top_digit(x, n, k);
    const std::uint32_t lo = static_cast<std::uint32_t>(b0) << kShift[0];
    at::parallel_for(0, parts, 1, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p)
        ws.part_counts[p + 1] = count_keys_at_least(x, part_begin(n, parts, p), part_begin(n, parts, p + 1), lo);
    });
    for (std::int64_t p = 0; p < parts; ++p) ws.part_counts[p + 1] += ws.part_counts[p];
    if (ws.part_counts[parts] < k) b0 = -1;
  }
  if (b0 < 0) {
    const std::size_t hsize = static_cast<std::size_t>(parts) * 4 * kBins;
    if (ws.hist.size() < hsize) ws.hist.resize(hsize);
    std::fill(ws.hist.begin(), ws.hist.begin() + static_cast<std::ptrdiff_t>(hsize), 0U);
    at::parallel_for(0, parts, 1, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p)
        histogram_top(x, part_begin(n, parts, p), part_begin(n, parts, p + 1), ws.hist.data() + p * 4 * kBins);
    });
    std::uint32_t total[kBins] = {};
    for (std::int64_t p = 0; p < parts; ++p)
      for (int j = 0; j < kBins; ++j) total[j] += ws.hist[static_cast<std::size_t>(p * 4 * kBins + j)];
    std::int64_t above = 0;
    b0 = find_bin(total, kBins, k, &above);
    for (std::int64_t p = 0; p < parts; ++p) {
      std::int64_t c = 0;
      const std::uint32_t* h = ws.hist.data() + p * 4 * kBins;
      for (int j = b0; j < kBins; ++j) c += h[j];
      ws.part_counts[p + 1] = ws.part_counts[p] + c;
    }
  }

  // 2. Compact the indices and keys of the candidates, in index order.
  const std::int64_t m = ws.part_counts[parts];
  // The candidate count follows the data (error feedback's memory drifts from step to
  // step): grow to twice the need, so that a step rarely finds the buffers short.
  if (static_cast<std::int64_t>(ws.candidates.size()) < m + 8) {
    const auto grown = static_cast<std::size_t>(std::min(2 * m, n) + 8);
    ws.candidates.resize(grown);
    ws.candidate_keys.resize(grown);
  }
  const std::uint32_t lo0 = static_cast<std::uint32_t>(b0) << kShift[0];
  at::parallel_for(0, parts, 1, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      compact(x, part_begin(n, parts, p), part_begin(n, parts, p + 1), lo0, ws.candidates.data() + ws.part_counts[p],
              ws.candidate_keys.data() + ws.part_counts[p], ws.part_counts[p + 1] - ws.part_counts[p]);
    }
  });

  // 3. The k-th largest key, digit by digit over the candidates (all k are among them).
  std::uint32_t prefix = 0, fixed = 0;
  std::int64_t need = k;  // keys still to take at or below the prefix found so far
  const std::uint32_t* cand = ws.candidates.data();
  const std::uint32_t* keys = ws.candidate_keys.data();
  for (int d = 0; d < 3; ++d) {
    std::uint32_t h[kBins] = {};
    for (std::int64_t j = 0; j < m; ++j) {
      const std::uint32_t key = keys[j];
      if ((key & fixed) == prefix) ++h[(key >> kShift[d]) & kMask[d]];
    }
    std::int64_t up = 0;
    const int bd = find_bin(h, static_cast<int>(kMask[d]) + 1, need, &up);
    need -= up;
    prefix |= static_cast<std::uint32_t>(bd) << kShift[d];
    fixed |= kMask[d] << kShift[d];
  }
  const std::uint32_t kth = prefix;  // the k-th largest key; `need` of the keys equal to it are taken

  // 4. Emit in index order: keys above kth, and the first `need` keys equal to it.
  std::int64_t out = 0;
  for (std::int64_t j = 0; j < m; ++j) {
    const std::uint32_t i = cand[j];
    const std::uint32_t key = keys[j];
    const bool take = key > kth || (key == kth && need > 0);
    if (key == kth && need > 0) --need;
    if (take) {
      idx[out] = i;
      val[out] = x[i];
      ++out;
    }
  }
}

std::int64_t threshold_parts(std::int64_t n) { return part_count(n, 1 << 16); }

template <class T>
std::int64_t threshold_count(const T* x, std::int64_t n, float t, std::int64_t* part_counts) {
  const std::int64_t parts = threshold_parts(n);
  part_counts[0] = 0;
  at::parallel_for(0, parts, 1, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      std::int64_t c = 0;
      for (std::int64_t i = part_begin(n, parts, p); i < part_begin(n, parts, p + 1); ++i) {
        const float v = to_float(x[i]);
        c += (std::fabs(v) >= t) | (v != v);
      }
      part_counts[p + 1] = c;
    }
  });
  for (std::int64_t p = 0; p < parts; ++p) part_counts[p + 1] += part_counts[p];
  return part_counts[parts];
}

template <class T>
void threshold_select(const T* x, std::int64_t n, float t, const std::int64_t* part_counts, std::uint32_t* idx,
                      T* val) {
  const std::int64_t parts = threshold_parts(n);
  at::parallel_for(0, parts, 1, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      std::int64_t o = part_counts[p];
      for (std::int64_t i = part_begin(n, parts, p); i < part_begin(n, parts, p + 1); ++i) {
        const float v = to_float(x[i]);
        if ((std::fabs(v) >= t) | (v != v)) {
          idx[o] = static_cast<std::uint32_t>(i);
          val[o] = x[i];
          ++o;
        }
      }
    }
  });
}

void random_k_indices(std::int64_t n, std::int64_t k, std::uint64_t key, SelectWorkspace& ws, std::uint32_t* idx) {
  if (k <= 0) return;
  const std::size_t words = static_cast<std::size_t>((n + 63) / 64);
  if (ws.bitmap.size() < words) ws.bitmap.resize(words, 0);
  std::uint64_t* bits = ws.bitmap.data();
  // Floyd: for j = n-k .. n-1, draw t uniform in [0, j]; take t, or j if t is taken.
  std::uint64_t draw = 0;
  for (std::int64_t j = n - k; j < n; ++j) {
    const std::uint64_t r = detail::mix64(key + 0x9E3779B97F4A7C15ULL * ++draw);
    // t = floor(u * (j + 1)) for a 32-bit uniform u (segments hold fewer than 2^32 elements)
    const std::uint64_t t = ((r >> 32) * static_cast<std::uint64_t>(j + 1)) >> 32;
    const std::uint64_t pick = (bits[t >> 6] >> (t & 63)) & 1U ? static_cast<std::uint64_t>(j) : t;
    bits[pick >> 6] |= 1ULL << (pick & 63);
  }
  std::int64_t out = 0;
  for (std::size_t w = 0; w < words && out < k; ++w) {
    std::uint64_t b = bits[w];
    bits[w] = 0;
    while (b) {
      idx[out++] = static_cast<std::uint32_t>(64 * w + static_cast<std::size_t>(std::countr_zero(b)));
      b &= b - 1;
    }
  }
}

#define DTSIM_SELECT_INSTANTIATE(T)                                                                   \
  template void top_k<T>(const T*, std::int64_t, std::int64_t, SelectWorkspace&, std::uint32_t*, T*); \
  template std::int64_t threshold_count<T>(const T*, std::int64_t, float, std::int64_t*);             \
  template void threshold_select<T>(const T*, std::int64_t, float, const std::int64_t*, std::uint32_t*, T*);
DTSIM_SELECT_INSTANTIATE(float)
DTSIM_SELECT_INSTANTIATE(c10::Half)
DTSIM_SELECT_INSTANTIATE(c10::BFloat16)
#undef DTSIM_SELECT_INSTANTIATE

}  // namespace dtsim::kernels::cpu
