// kernels/llm_codecs.hpp: FP4 E3M0, INTELLECT-1's int8 codebook, SparseLoCo's 2-bit values and
// top-k per chunk, DeMo's chunked DCT with top-k. Each codec against a straightforward
// reference written here from its definition (exhaustive nearest-level searches, sums in
// double, the DCT formula in double), its round trip, its bit count, its edge cases; and the
// CUDA twins against the CPU kernels byte for byte where a GPU is present (skipped otherwise).
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/llm_codecs.hpp"

namespace dtsim {
namespace {

namespace llm = kernels::llm;

at::Tensor randn(std::vector<std::int64_t> shape, std::uint64_t seed, double scale = 1.0) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn(shape, gen, at::kFloat) * scale;
}

// --- FP4 E3M0 --------------------------------------------------------------------------------

// The reference: the levels 0 and s 2^(e - 7), e = 1..7, searched exhaustively for the one
// nearest r = |x| / s (the codec's fp32 quotient), ties to the larger, the sign kept.
float fp4_reference(float x, float s) {
  if (!(s > 0.0f) || !std::isfinite(s)) return 0.0f * s;
  const double r = static_cast<double>(std::fabs(x) / s);
  double best = 0.0, best_d = r;
  for (int e = 1; e <= 7; ++e) {
    const double level = std::ldexp(1.0, e - 7);
    const double d = std::fabs(r - level);
    if (d <= best_d) {  // <=: ties to the larger level
      best = level;
      best_d = d;
    }
  }
  const float v = static_cast<float>(best) * s;
  return best == 0.0 ? 0.0f : (std::signbit(x) ? -v : v);
}

TEST(LlmCodecs, Fp4MatchesTheExhaustiveReference) {
  // Random values of several scales, values on every level and every midpoint, zeros, and
  // blocks of 16 (the last one short).
  auto x = randn({1003}, 1);
  x.mul_(at::pow(2.0, at::randint(-12, 3, {1003}, at::detail::createCPUGenerator(2), at::kLong).to(at::kFloat)));
  auto* p = x.data_ptr<float>();
  p[0] = 0.0f;
  p[1] = -0.0f;
  for (int e = 0; e < 8; ++e) {  // in one block of scale 1: every level and the midpoints
    p[16 + 2 * e] = std::ldexp(1.0f, e - 7);
    p[17 + 2 * e] = -1.5f * std::ldexp(1.0f, e - 8);
  }
  p[32] = 1.0f;                   // the block's scale
  p[33] = std::ldexp(1.0f, -7);   // exactly half the smallest level: rounds up to it
  p[34] = std::ldexp(0.99f, -7);  // below: 0
  for (int i = 35; i < 48; ++i) p[i] = 0.5f;  // so that 1 is that block's scale
  for (std::int64_t block : {0, 16, 1003}) {
    const auto payload = llm::fp4_encode(x, block);
    const std::int64_t b = block == 0 ? 1003 : block;
    const std::int64_t blocks = (1003 + b - 1) / b;
    EXPECT_EQ(payload.bits(), 4 * 1004 + 32 * blocks);  // 1003 nibbles and one of padding
    auto out = at::empty_like(x);
    llm::fp4_decode(payload, out);
    const auto* o = out.data_ptr<float>();
    for (std::int64_t i = 0; i < 1003; ++i) {
      const std::int64_t b0 = i / b * b;
      const float s = x.narrow(0, b0, std::min(b, 1003 - b0)).abs().max().item<float>();
      ASSERT_EQ(o[i], fp4_reference(p[i], s)) << "block " << block << " element " << i << " x " << p[i] << " s " << s;
      EXPECT_FALSE(std::signbit(o[i]) && o[i] == 0.0f) << "a -0 decoded";
    }
    // Accumulating: out + w decode.
    auto acc = at::ones_like(x);
    llm::fp4_decode(payload, acc, 0.5f, true);
    EXPECT_TRUE(at::equal(acc, 1.0f + out * 0.5f));
  }
  // The top level is the block's maximum itself; an element 2^-7 of it or less is at most
  // the smallest level; relative error at most 1/3 above that (between 2^k and 2^(k+1)).
  const auto payload = llm::fp4_encode(x, 0);
  auto out = at::empty_like(x);
  llm::fp4_decode(payload, out);
  const float s = x.abs().max().item<float>();
  const auto big = x.abs() >= s / 64;
  EXPECT_LE(((out - x).abs() / x.abs()).masked_select(big).max().item<float>(), 1.0f / 3.0f + 1e-6f);
}

TEST(LlmCodecs, Fp4EdgeCases) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto x = at::tensor({0.0f, 0.0f, 1.0f, -3.0f, inf, 2.0f, nan, 1.0f}, at::kFloat);
  const auto p = llm::fp4_encode(x, 2);
  auto out = at::empty_like(x);
  llm::fp4_decode(p, out);
  const auto* o = out.data_ptr<float>();
  EXPECT_EQ(o[0], 0.0f);  // an all-zero block stays 0
  EXPECT_EQ(o[1], 0.0f);
  EXPECT_EQ(o[3], -3.0f);  // the scale itself
  EXPECT_EQ(o[2], 0.75f);  // 1/3 of the scale: nearest level 2^-2 s (0.75) rather than 2^-1 s (1.5)
  for (int i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(o[i])) << i;  // blocks holding Inf or NaN decode to NaN
  EXPECT_THROW(llm::fp4_encode(x.to(at::kDouble)), std::invalid_argument);
  auto wrong = at::empty({3}, at::kFloat);
  EXPECT_THROW(llm::fp4_decode(p, wrong), std::invalid_argument);
}

// --- int8 codebook -----------------------------------------------------------------------------

TEST(LlmCodecs, Int8CodebookMatchesTheReference) {
  auto x = randn({100003}, 3, 0.01) + 0.002;
  x.data_ptr<float>()[5] = 1.0f;  // an outlier far beyond 6 sigma: clamped into the top bin
  x.data_ptr<float>()[6] = -1.0f;
  const auto p = llm::int8_encode(x);
  EXPECT_EQ(p.bits(), 8 * 100003 + 8192);
  // mu and sigma (n - 1), in long double, two passes.
  const auto* v = x.data_ptr<float>();
  const std::int64_t n = x.numel();
  long double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += v[i];
  const long double mu = sum / n;
  long double ss = 0;
  for (std::int64_t i = 0; i < n; ++i) ss += (v[i] - mu) * (v[i] - mu);
  const long double sigma = std::sqrt(ss / (n - 1));
  EXPECT_NEAR(p.mu, static_cast<double>(mu), 1e-15);
  EXPECT_NEAR(p.sigma, static_cast<double>(sigma), 1e-12 * static_cast<double>(sigma));
  // Bins of width 12 sigma / 256 from mu - 6 sigma, clamped; each bin's mean.
  const long double lo = mu - 6 * sigma, w = 12 * sigma / 256;
  std::vector<long double> bin_sum(256, 0);
  std::vector<std::int64_t> bin_count(256, 0);
  const auto* codes = p.codes.data_ptr<std::uint8_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const long double t = (v[i] - lo) / w;
    const int c = t < 0 ? 0 : t >= 256 ? 255 : static_cast<int>(t);
    ASSERT_EQ(codes[i], c) << "element " << i;
    bin_sum[c] += v[i];
    ++bin_count[c];
  }
  EXPECT_EQ(codes[5], 255);
  EXPECT_EQ(codes[6], 0);
  const auto* book = p.codebook.data_ptr<float>();
  for (int c = 0; c < 256; ++c) {
    const double expected = bin_count[c] ? static_cast<double>(bin_sum[c] / bin_count[c])
                                         : static_cast<double>(lo + (c + 0.5L) * w);
    EXPECT_NEAR(book[c], expected, 1e-7 * std::abs(expected) + 1e-12) << "bin " << c;
  }
  auto out = at::empty_like(x);
  llm::int8_decode(p, out);
  // In range, each element within one bin width of its decode (the mean of its own bin).
  const auto in_range = (x - p.mu).abs() < 6 * p.sigma;
  EXPECT_LE((out - x).abs().masked_select(in_range).max().item<double>(), 12 * p.sigma / 256);
  // The decode keeps the sum (each bin decodes to the mean of its values).
  EXPECT_NEAR(out.sum().item<double>(), x.to(at::kDouble).sum().item<double>(), 1e-3);
}

TEST(LlmCodecs, Int8CodebookEdgeCases) {
  auto constant = at::full({1000}, 0.25f);
  const auto c = llm::int8_encode(constant);
  EXPECT_EQ(c.sigma, 0.0);
  auto out = at::empty_like(constant);
  llm::int8_decode(c, out);
  EXPECT_TRUE(at::equal(out, constant));  // bin 128, whose mean is the constant
  auto one = at::full({1}, -2.0f);
  auto out1 = at::empty_like(one);
  llm::int8_decode(llm::int8_encode(one), out1);
  EXPECT_EQ(out1.item<float>(), -2.0f);
  auto bad = randn({100}, 4);
  bad.data_ptr<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  auto outn = at::empty_like(bad);
  llm::int8_decode(llm::int8_encode(bad), outn);
  EXPECT_TRUE(at::isnan(outn).all().item<bool>());
  EXPECT_THROW(llm::int8_encode(at::empty({0}, at::kFloat)), std::invalid_argument);
}

// --- 2-bit values ------------------------------------------------------------------------------

TEST(LlmCodecs, TwoBitValuesMatchTheExhaustiveReference) {
  auto v = randn({37, 13}, 5);
  v[3].zero_();  // a zero row
  v.data_ptr<float>()[13 * 5] = 3.0f;  // row 5's scale
  v.data_ptr<float>()[13 * 5 + 1] = 1.0f;  // on the level M/3 exactly... and midpoints:
  v.data_ptr<float>()[13 * 5 + 2] = 2.0f;  // (M/3 + M) / 2: a tie, to the larger
  v.data_ptr<float>()[13 * 5 + 3] = 0.0f;  // between -M/3 and M/3: a tie, to M/3
  for (int j = 4; j < 13; ++j) v.data_ptr<float>()[13 * 5 + j] = 0.1f * static_cast<float>(j - 8);
  const auto p = llm::two_bit_encode(v);
  EXPECT_EQ(p.bits(), 2 * 37 * 13 + 32 * 37);
  EXPECT_EQ(p.codes.numel(), (37 * 13 + 3) / 4);
  const auto out = llm::two_bit_decode(p);
  for (std::int64_t r = 0; r < 37; ++r) {
    const float M = v[r].abs().max().item<float>();
    for (std::int64_t j = 0; j < 13; ++j) {
      const float x = v[r][j].item<float>();
      float expected = M / 3.0f;  // a zero row: code 2, 0
      if (M > 0.0f) {
        double best_d = INFINITY;
        for (int c = 0; c < 4; ++c) {
          const float level = M * (static_cast<float>(2 * c - 3) / 3.0f);
          const double d = std::fabs(static_cast<double>(x / M) - (2.0 * c - 3.0) / 3.0);
          if (d <= best_d + 1e-7) {  // ties (to rounding of x / M) to the larger
            best_d = std::min(best_d, d);
            expected = level;
          }
        }
      }
      ASSERT_EQ(out[r][j].item<float>(), expected) << "row " << r << " element " << j << " x " << x;
    }
  }
  EXPECT_EQ(out[5][2].item<float>(), 3.0f);
  EXPECT_EQ(out[5][3].item<float>(), 1.0f);
}

// --- chunks, top-k, DCT -------------------------------------------------------------------------

TEST(LlmCodecs, ChunkLayoutsPadAndRoundTrip) {
  const auto l = llm::chunk_layout({100, 70}, 64);
  EXPECT_EQ(l.tile_rows, 64);
  EXPECT_EQ(l.tile_cols, 64);
  EXPECT_EQ(l.chunks(), 4);
  EXPECT_EQ(l.index_bits(), 12);
  EXPECT_EQ(llm::chunk_layout({10}, 64).elements(), 10);  // a short vector: one chunk of itself
  EXPECT_EQ(llm::chunk_layout({10}, 64).index_bits(), 4);
  EXPECT_EQ(llm::chunk_layout({130}, 64).chunks(), 3);
  EXPECT_EQ(llm::chunk_layout({}, 64).elements(), 1);
  EXPECT_EQ(llm::chunk_layout({1}, 64).index_bits(), 1);
  EXPECT_EQ(llm::chunk_layout({4, 3, 5}, 2).cols, 15);  // the first dimension times the rest
  EXPECT_THROW(llm::chunk_layout({8192}, 8192), std::invalid_argument);
  EXPECT_THROW(llm::chunk_layout({100, 100}, 65), std::invalid_argument);
  for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{100, 70}, {130}, {4, 3, 5}, {64, 64}}) {
    const auto x = randn(shape, 6);
    const auto layout = llm::chunk_layout(shape, shape.size() == 3 ? 2 : 64);
    const auto chunks = llm::to_chunks(x, layout);
    EXPECT_EQ(chunks.size(0), layout.chunks());
    EXPECT_TRUE(at::equal(llm::from_chunks(chunks, layout), x));
    EXPECT_NEAR(chunks.to(at::kDouble).abs().sum().item<double>(), x.to(at::kDouble).abs().sum().item<double>(),
                1e-9);  // padding is zeros
  }
  // Tile (1, 0) of a 100 x 70 matrix holds rows 64..99 of columns 0..63, padded.
  const auto x = randn({100, 70}, 7);
  const auto chunks = llm::to_chunks(x, l);
  EXPECT_TRUE(at::equal(chunks[2].view({64, 64}).narrow(0, 0, 36), x.narrow(0, 64, 36).narrow(1, 0, 64)));
}

// The DCT-II in double from its formula, per chunk of tr x tc.
at::Tensor dct_reference(const at::Tensor& chunks, std::int64_t tr, std::int64_t tc) {
  auto out = at::zeros(chunks.sizes(), at::kDouble);
  const auto in = chunks.to(at::kDouble);
  const double pi = std::acos(-1.0);
  auto s = [](std::int64_t k, std::int64_t n) { return std::sqrt((k == 0 ? 1.0 : 2.0) / static_cast<double>(n)); };
  for (std::int64_t c = 0; c < chunks.size(0); ++c) {
    const auto* x = in[c].data_ptr<double>();
    auto* y = out[c].data_ptr<double>();
    for (std::int64_t p = 0; p < tr; ++p)
      for (std::int64_t q = 0; q < tc; ++q) {
        double sum = 0;
        for (std::int64_t i = 0; i < tr; ++i)
          for (std::int64_t j = 0; j < tc; ++j)
            sum += x[i * tc + j] * std::cos(pi * (i + 0.5) * p / tr) * std::cos(pi * (j + 0.5) * q / tc);
        y[p * tc + q] = s(p, tr) * s(q, tc) * sum;
      }
  }
  return out;
}

// fp32 against double: each coefficient is a dot product of at most 64 + 64 terms of
// magnitude <= |x|, rounded at each step: within 64 ulps of the chunk's norm, 1e-5 of it.
TEST(LlmCodecs, DctIsTheOrthonormalDctIIAndInvertsIt) {
  for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{200}, {100, 70}, {64, 64}, {3, 5}}) {
    SCOPED_TRACE(shape.size() == 1 ? "1-D" : "2-D");
    const auto x = randn(shape, 8);
    const auto l = llm::chunk_layout(shape, 64);
    const auto chunks = llm::to_chunks(x, l);
    const auto coeffs = llm::dct_chunks(chunks, l);
    const auto reference = dct_reference(chunks, l.tile_rows, l.tile_cols);
    const double norm = chunks.norm().item<double>();
    EXPECT_LE((coeffs.to(at::kDouble) - reference).abs().max().item<double>(), 1e-5 * norm);
    // Parseval (orthonormal): the energy of every chunk is kept.
    EXPECT_NEAR(coeffs.pow(2).sum().item<double>(), chunks.pow(2).sum().item<double>(), 1e-5 * norm * norm);
    const auto back = llm::dct_chunks(coeffs, l, /*inverse=*/true);
    EXPECT_LE((back - chunks).abs().max().item<double>(), 1e-5 * norm);
    // The DCT of a constant chunk is its DC coefficient alone.
    const auto flat = at::ones({1, l.elements()}, at::kFloat);
    const auto dc = llm::dct_chunks(flat, l);
    EXPECT_NEAR(dc[0][0].item<double>(), std::sqrt(static_cast<double>(l.elements())), 1e-4);
    EXPECT_LE(dc[0].narrow(0, 1, l.elements() - 1).abs().max().item<double>(), 1e-5);
  }
}

TEST(LlmCodecs, TopKPerChunkKeepsTheLargestAndPacksTheirIndices) {
  const auto x = randn({100, 70}, 9);
  const auto l = llm::chunk_layout(x.sizes(), 64);
  auto chunks = llm::to_chunks(x, l);
  chunks[1][5] = chunks[1][7] = 50.0f;  // a tie: both kept, the lower index first
  const auto p = llm::topk_chunks(chunks, l, 32);
  EXPECT_EQ(p.bits(), 4 * 32 * (32 + 12));
  const auto indices = llm::topk_indices(p);
  for (std::int64_t c = 0; c < l.chunks(); ++c) {
    // The reference: sort by magnitude (descending), then index, keep 32, sort by index.
    std::vector<std::int32_t> order(static_cast<std::size_t>(l.elements()));
    std::iota(order.begin(), order.end(), 0);
    const auto* v = chunks[c].data_ptr<float>();
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return std::fabs(v[a]) > std::fabs(v[b]); });
    order.resize(32);
    std::sort(order.begin(), order.end());
    for (int j = 0; j < 32; ++j) {
      ASSERT_EQ(indices[c][j].item<std::int32_t>(), order[static_cast<std::size_t>(j)]) << "chunk " << c;
      ASSERT_EQ(p.values[c][j].item<float>(), v[order[static_cast<std::size_t>(j)]]);
    }
  }
  // The packing, bit by bit: index q's bit b is bit q * 12 + b of the stream.
  const auto* words = reinterpret_cast<const std::uint32_t*>(p.index_words.data_ptr<std::int32_t>());
  const auto flat = indices.view({-1});
  for (std::int64_t q = 0; q < flat.numel(); ++q)
    for (int b = 0; b < 12; ++b) {
      const std::int64_t bit = q * 12 + b;
      ASSERT_EQ((words[bit / 32] >> (bit % 32)) & 1U, (static_cast<std::uint32_t>(flat[q].item<std::int32_t>()) >> b) & 1U);
    }
  EXPECT_EQ(p.index_words.numel(), (4 * 32 * 12 + 31) / 32);
  // k above a chunk's size keeps it all; the scatter rebuilds the chunks.
  const auto all = llm::topk_chunks(chunks, l, 5000);
  EXPECT_EQ(all.k, l.elements());
  EXPECT_TRUE(at::equal(llm::topk_scatter(all), chunks));
  EXPECT_THROW(llm::topk_chunks(chunks, l, 0), std::invalid_argument);
}

// DeMo's step on whole tiles: the kept part of delta's DCT is what the decode returns, so delta
// minus the decode has (to rounding) none of it left, and its energy is that of the dropped
// coefficients. (On zero-padded tiles the decode is cropped, so some of the kept part stays:
// what is subtracted is still exactly what was sent.) k = E decodes delta itself, padded or not.
TEST(LlmCodecs, DctEncodeDecodeIsDeMosCompression) {
  const auto delta = randn({128, 128}, 10, 1e-3);
  const auto p = llm::dct_encode(delta, 64, 32);
  EXPECT_EQ(p.layout.chunks(), 4);
  EXPECT_EQ(p.bits(), 4 * 32 * (32 + 12));  // vs 128 x 128 x 32 bits dense: 93x less
  auto decoded = at::empty_like(delta);
  llm::dct_decode(p, decoded);
  const auto residual = delta - decoded;
  const auto l = p.layout;
  const auto coeffs = llm::dct_chunks(llm::to_chunks(delta, l), l);
  const auto kept = llm::topk_scatter(p);
  const double dropped = (coeffs - kept).pow(2).sum().item<double>();
  EXPECT_NEAR(residual.pow(2).sum().item<double>(), dropped, 1e-4 * dropped);
  const auto residual_coeffs = llm::dct_chunks(llm::to_chunks(residual, l), l);
  EXPECT_LE(residual_coeffs.masked_select(kept != 0).abs().max().item<double>(), 1e-5 * delta.abs().max().item<double>());
  for (const auto& x : {delta, randn({100, 70}, 14, 1e-3), randn({130}, 15, 1e-3)}) {
    const auto full = llm::dct_encode(x, 64, 64 * 64);
    auto back = at::empty_like(x);
    llm::dct_decode(full, back);
    EXPECT_LE((back - x).abs().max().item<double>(), 1e-5 * x.abs().max().item<double>());
  }
  auto acc = at::ones_like(delta);
  llm::dct_decode(p, acc, -1.0f, true);
  EXPECT_TRUE(at::allclose(acc, 1.0f - decoded));
}

// SparseLoCo's message: top-k per chunk, the kept values in 2 bits.
TEST(LlmCodecs, SparseLoCoTopKThenTwoBitValues) {
  const auto e = randn({4096 * 3}, 11);
  const auto p = llm::sparse_encode(e, 4096, 82);  // 2 % density
  EXPECT_EQ(p.bits(), 3 * 82 * (32 + 12));
  const auto q = llm::two_bit_encode(p.values);
  EXPECT_EQ(q.bits(), 2 * 3 * 82 + 32 * 3);
  auto sparse = at::empty_like(e);
  llm::sparse_decode(p, sparse);
  EXPECT_EQ((sparse != 0).sum().item<std::int64_t>(), 3 * 82);
  EXPECT_TRUE(at::equal(sparse.masked_select(sparse != 0), e.masked_select(sparse != 0)));
  const auto values = llm::two_bit_decode(q);
  // Every kept value is at least the chunk's 83rd magnitude, so within its level spacing:
  EXPECT_LE((values - p.values).abs().max().item<float>(), p.values.abs().max().item<float>() / 3.0f + 1e-6f);
}

// --- the CUDA twins ---------------------------------------------------------------------------

TEST(LlmCodecsCuda, SameBytesAsTheCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device (or a CPU LibTorch)";
  const auto x = randn({70001}, 12);
  const auto xg = x.cuda();
  const auto f = llm::fp4_encode(x, 128), fg = llm::fp4_encode(xg, 128);
  EXPECT_TRUE(at::equal(f.codes, fg.codes.cpu()));
  EXPECT_TRUE(at::equal(f.scales, fg.scales.cpu()));
  const auto i = llm::int8_encode(x), ig = llm::int8_encode(xg);
  EXPECT_TRUE(at::equal(i.codes, ig.codes.cpu()));
  EXPECT_TRUE(at::equal(i.codebook, ig.codebook.cpu()));
  const auto m = randn({300, 200}, 13);
  const auto d = llm::dct_encode(m, 64, 32), dg = llm::dct_encode(m.cuda(), 64, 32);
  EXPECT_TRUE(at::equal(d.values, dg.values.cpu()));
  EXPECT_TRUE(at::equal(d.index_words, dg.index_words.cpu()));
  auto out = at::empty_like(m), outg = at::empty_like(m).cuda();
  llm::dct_decode(d, out);
  llm::dct_decode(dg, outg);
  EXPECT_TRUE(at::equal(out, outg.cpu()));
  const auto t = llm::two_bit_encode(d.values), tg = llm::two_bit_encode(dg.values);
  EXPECT_TRUE(at::equal(t.codes, tg.codes.cpu()));
  EXPECT_TRUE(at::equal(llm::two_bit_decode(t), llm::two_bit_decode(tg).cpu()));
}

}  // namespace
}  // namespace dtsim
