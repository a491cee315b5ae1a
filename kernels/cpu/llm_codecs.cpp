// CPU kernels of the LLM codecs (kernels/llm_codecs.hpp). Plain loops over the shared
// formulas (detail/llm_codecs.hpp); the work is split over cores by block, chunk or element
// range, never inside a sum, so the results do not depend on the thread count.
//
// Napkin math (bytes per element): fp4 reads x twice (scales, codes) and writes 1/2; its
// decode reads 1/2 and writes 4 (8 when accumulating). int8 reads x three times (mean,
// variance, codes with the bin sums) and writes 1. DCT: a 64-element chunk costs 2 x 64
// flops per element and direction (128 x 2 for a 64 x 64 tile): compute-bound, O(E sqrt E)
// per chunk rather than a fast transform's O(E log E), chosen for an order both devices share.
#include "kernels/cpu/llm_codecs.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/detail/llm_codecs.hpp"

namespace dtsim::kernels::cpu {

using detail::llm_mag_key;

void fp4_scales(const float* x, std::int64_t n, std::int64_t block, float* scales) {
  const std::int64_t blocks = (n + block - 1) / block;
  at::parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      std::uint32_t top = 0;  // the largest key: NaN above Inf, an order-free maximum
      for (std::int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) top = std::max(top, llm_mag_key(x[i]));
      scales[b] = detail::bits_float(top);
    }
  });
}

void fp4_encode(const float* x, std::int64_t n, std::int64_t block, const float* scales, std::uint8_t* codes) {
  at::parallel_for(0, (n + 1) / 2, 4096, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      std::uint32_t byte = detail::fp4_code(x[2 * p], scales[2 * p / block]);
      if (2 * p + 1 < n) byte |= detail::fp4_code(x[2 * p + 1], scales[(2 * p + 1) / block]) << 4;
      codes[p] = static_cast<std::uint8_t>(byte);
    }
  });
}

void fp4_decode(const std::uint8_t* codes, const float* scales, std::int64_t n, std::int64_t block, float weight,
                bool accumulate, float* out) {
  at::parallel_for(0, n, 8192, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const float v = detail::fp4_value((codes[i / 2] >> (4 * (i % 2))) & 0xFU, scales[i / block]);
      out[i] = accumulate ? out[i] + weight * v : v;
    }
  });
}

void int8_stats(const float* x, std::int64_t n, double* partials, double* mu_sigma) {
  const std::int64_t chunks = (n + kStatChunk - 1) / kStatChunk;
  auto chunked = [&](auto term) {
    at::parallel_for(0, chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
      for (std::int64_t c = c0; c < c1; ++c) {
        double s = 0.0;
        for (std::int64_t i = c * kStatChunk; i < std::min(n, (c + 1) * kStatChunk); ++i) s = s + term(x[i]);
        partials[c] = s;
      }
    });
    double total = 0.0;
    for (std::int64_t c = 0; c < chunks; ++c) total = total + partials[c];
    return total;
  };
  const double mu = chunked([](float v) { return static_cast<double>(v); }) / static_cast<double>(n);
  const double ss = chunked([mu](float v) {
    const double d = static_cast<double>(v) - mu;
    return d * d;
  });
  mu_sigma[0] = mu;
  mu_sigma[1] = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
}

void int8_encode(const float* x, std::int64_t n, const double* mu_sigma, std::uint8_t* codes, double* bin_sums,
                 std::int64_t* bin_counts, float* codebook) {
  const double mu = mu_sigma[0], sigma = mu_sigma[1];
  const bool spread = sigma > 0.0 && std::isfinite(sigma) && std::isfinite(mu);
  const double lo = mu - 6.0 * sigma, width = 12.0 * sigma / 256.0;
  const std::int64_t chunks = (n + kBinChunk - 1) / kBinChunk;
  at::parallel_for(0, chunks, 1, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      double* sums = bin_sums + 256 * c;
      std::int64_t* counts = bin_counts + 256 * c;
      std::fill(sums, sums + 256, 0.0);
      std::fill(counts, counts + 256, 0);
      for (std::int64_t i = c * kBinChunk; i < std::min(n, (c + 1) * kBinChunk); ++i) {
        const std::uint32_t code = spread ? detail::int8_code(x[i], lo, width) : 128U;
        codes[i] = static_cast<std::uint8_t>(code);
        sums[code] = sums[code] + static_cast<double>(x[i]);
        counts[code] += 1;
      }
    }
  });
  for (int b = 0; b < 256; ++b) {
    double s = 0.0;
    std::int64_t count = 0;
    for (std::int64_t c = 0; c < chunks; ++c) {
      s = s + bin_sums[256 * c + b];
      count += bin_counts[256 * c + b];
    }
    codebook[b] = count > 0 ? static_cast<float>(s / static_cast<double>(count))
                            : static_cast<float>(lo + (static_cast<double>(b) + 0.5) * width);
  }
}

void int8_decode(const std::uint8_t* codes, const float* codebook, std::int64_t n, float weight, bool accumulate,
                 float* out) {
  at::parallel_for(0, n, 8192, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const float v = codebook[codes[i]];
      out[i] = accumulate ? out[i] + weight * v : v;
    }
  });
}

void two_bit_encode(const float* values, std::int64_t rows, std::int64_t k, float* scales, std::uint8_t* codes) {
  at::parallel_for(0, rows, 64, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      std::uint32_t top = 0;
      for (std::int64_t j = 0; j < k; ++j) top = std::max(top, llm_mag_key(values[r * k + j]));
      scales[r] = detail::bits_float(top);
    }
  });
  // Bytes straddle rows: one pass over bytes once every scale is known.
  const std::int64_t n = rows * k;
  at::parallel_for(0, (n + 3) / 4, 4096, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      std::uint32_t byte = 0;
      for (std::int64_t j = 4 * b; j < std::min(n, 4 * b + 4); ++j)
        byte |= detail::two_bit_code(values[j], scales[j / k]) << (2 * (j % 4));
      codes[b] = static_cast<std::uint8_t>(byte);
    }
  });
}

void two_bit_decode(const std::uint8_t* codes, const float* scales, std::int64_t rows, std::int64_t k, float* out) {
  const std::int64_t n = rows * k;
  at::parallel_for(0, n, 8192, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i)
      out[i] = detail::two_bit_value((codes[i / 4] >> (2 * (i % 4))) & 3U, scales[i / k]);
  });
}

void dct_chunks(const float* dr, const float* dc, const float* in, std::int64_t count, std::int64_t tr,
                std::int64_t tc, bool inverse, float* scratch, float* out) {
  const std::int64_t E = tr * tc;
  at::parallel_for(0, count, 1, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const float* x = in + c * E;
      float* t = scratch + c * E;
      float* y = out + c * E;
      if (!inverse) {
        // rows: t[r][q] = sum_j Dc[q][j] x[r][j]; columns: y[p][q] = sum_i Dr[p][i] t[i][q]
        for (std::int64_t r = 0; r < tr; ++r)
          for (std::int64_t q = 0; q < tc; ++q) t[r * tc + q] = detail::strided_dot(dc + q * tc, 1, x + r * tc, 1, tc);
        for (std::int64_t p = 0; p < tr; ++p)
          for (std::int64_t q = 0; q < tc; ++q) y[p * tc + q] = detail::strided_dot(dr + p * tr, 1, t + q, tc, tr);
      } else {
        // columns: t[i][q] = sum_p Dr[p][i] x[p][q]; rows: y[r][j] = sum_q Dc[q][j] t[r][q]
        for (std::int64_t i = 0; i < tr; ++i)
          for (std::int64_t q = 0; q < tc; ++q) t[i * tc + q] = detail::strided_dot(dr + i, tr, x + q, tc, tr);
        for (std::int64_t r = 0; r < tr; ++r)
          for (std::int64_t j = 0; j < tc; ++j) y[r * tc + j] = detail::strided_dot(dc + j, tc, t + r * tc, 1, tc);
      }
    }
  });
}

void topk_chunks(const float* in, std::int64_t count, std::int64_t E, std::int64_t k, std::int32_t* indices,
                 float* values) {
  at::parallel_for(0, count, 1, [&](std::int64_t c0, std::int64_t c1) {
    std::vector<std::int32_t> order(static_cast<std::size_t>(E));
    for (std::int64_t c = c0; c < c1; ++c) {
      const float* x = in + c * E;
      std::iota(order.begin(), order.end(), 0);
      std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), [&](std::int32_t a, std::int32_t b) {
        return detail::outranks(llm_mag_key(x[a]), a, llm_mag_key(x[b]), b);
      });
      std::sort(order.begin(), order.begin() + k);
      for (std::int64_t j = 0; j < k; ++j) {
        indices[c * k + j] = order[static_cast<std::size_t>(j)];
        values[c * k + j] = x[order[static_cast<std::size_t>(j)]];
      }
    }
  });
}

void pack_indices(const std::int32_t* indices, std::int64_t count, std::int32_t bits, std::uint32_t* words) {
  const std::int64_t n = (count * bits + 31) / 32;
  at::parallel_for(0, n, 4096, [&](std::int64_t w0, std::int64_t w1) {
    for (std::int64_t w = w0; w < w1; ++w) words[w] = detail::packed_word(indices, count, bits, w);
  });
}

void unpack_indices(const std::uint32_t* words, std::int64_t count, std::int32_t bits, std::int32_t* indices) {
  at::parallel_for(0, count, 8192, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t q = q0; q < q1; ++q) indices[q] = detail::unpacked_index(words, bits, q);
  });
}

void scatter_chunks(const std::int32_t* indices, const float* values, std::int64_t count, std::int64_t E,
                    std::int64_t k, float* dense) {
  at::parallel_for(0, count, 64, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c)
      for (std::int64_t j = 0; j < k; ++j) dense[c * E + indices[c * k + j]] = values[c * k + j];
  });
}

}  // namespace dtsim::kernels::cpu
