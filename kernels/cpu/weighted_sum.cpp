#include "kernels/cpu/weighted_sum.hpp"

#include <ATen/Parallel.h>

#include <algorithm>

#include "kernels/cpu/common.hpp"

namespace dtsim::kernels::cpu {

namespace {

// The sums run a tile of 512 elements (2 KB) at a time: the output tile stays in L1 while
// the k inputs stream through it, so each input is read once and the output written once
// (32 K-element blocks re-read their 128 KB of output from L2 for every input). Per
// element the order is the same whatever the tile, ISA or thread count: the first term,
// then each input's product added in input order (no FMA: -ffp-contract=off).
constexpr std::int64_t kTile = 512;

[[gnu::always_inline]] inline void weighted_sum_range(float* __restrict out, const float* const* in, const float* w,
                                                      std::size_t k, std::int64_t begin, std::int64_t end) {
  for (std::int64_t a = begin; a < end; a += kTile) {
    const std::int64_t b = std::min(end, a + kTile);
    const float w0 = w[0];
    const float* __restrict x0 = in[0];
    for (std::int64_t i = a; i < b; ++i) out[i] = w0 * x0[i];
    for (std::size_t j = 1; j < k; ++j) {
      const float wj = w[j];
      const float* __restrict xj = in[j];
      for (std::int64_t i = a; i < b; ++i) out[i] += wj * xj[i];
    }
  }
}

[[gnu::always_inline]] inline void average_range(float* __restrict out, const float* const* in, std::int64_t k,
                                                 std::int64_t begin, std::int64_t end) {
  const float fk = static_cast<float>(k);
  for (std::int64_t a = begin; a < end; a += kTile) {
    const std::int64_t b = std::min(end, a + kTile);
    const float* __restrict x0 = in[0];
    for (std::int64_t i = a; i < b; ++i) out[i] = x0[i];
    for (std::int64_t j = 1; j < k; ++j) {
      const float* __restrict xj = in[j];
      for (std::int64_t i = a; i < b; ++i) out[i] += xj[i];
    }
    for (std::int64_t i = a; i < b; ++i) out[i] /= fk;
  }
}

#if defined(__x86_64__)
[[DTSIM_TARGET_AVX2]] void weighted_sum_avx2(float* out, const float* const* in, const float* w, std::size_t k,
                                             std::int64_t begin, std::int64_t end) {
  weighted_sum_range(out, in, w, k, begin, end);
}
[[DTSIM_TARGET_AVX512]] void weighted_sum_avx512(float* out, const float* const* in, const float* w, std::size_t k,
                                                 std::int64_t begin, std::int64_t end) {
  weighted_sum_range(out, in, w, k, begin, end);
}
[[DTSIM_TARGET_AVX2]] void average_avx2(float* out, const float* const* in, std::int64_t k, std::int64_t begin,
                                        std::int64_t end) {
  average_range(out, in, k, begin, end);
}
[[DTSIM_TARGET_AVX512]] void average_avx512(float* out, const float* const* in, std::int64_t k, std::int64_t begin,
                                            std::int64_t end) {
  average_range(out, in, k, begin, end);
}
#endif

}  // namespace

void weighted_sum(float* out, const float* const* in, const float* w, std::size_t k, int64_t n) {
  // Blocks of 32K elements keep small tensors on one thread.
  at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
    if (k == 0) {
      std::fill(out + begin, out + end, 0.0f);
      return;
    }
#if defined(__x86_64__)
    if (has_avx512()) return weighted_sum_avx512(out, in, w, k, begin, end);
    if (has_avx2()) return weighted_sum_avx2(out, in, w, k, begin, end);
#endif
    weighted_sum_range(out, in, w, k, begin, end);
  });
}

void average(float* out, const float* const* in, std::int64_t k, std::int64_t n) {
  at::parallel_for(0, n, 32768, [&](std::int64_t begin, std::int64_t end) {
#if defined(__x86_64__)
    if (has_avx512()) return average_avx512(out, in, k, begin, end);
    if (has_avx2()) return average_avx2(out, in, k, begin, end);
#endif
    average_range(out, in, k, begin, end);
  });
}

}  // namespace dtsim::kernels::cpu
