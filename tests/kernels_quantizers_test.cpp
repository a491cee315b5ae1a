// The one_bit, terngrad and natural compressors (kernels/codecs/one_bit.cpp, terngrad.cpp,
// natural.cpp) against references written here with plain ATen ops, on awkward shapes
// (one element, odd lengths, a tensor of negatives only, one of zeros, chunk and bucket
// boundaries): the decoded tensors bit for bit where the formula is exact, the payload
// sizes against their closed forms, 1-bit SGD's means in closed form, and TernGrad's and
// natural compression's unbiasedness over many seeds, within bounds derived from their
// known variances.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/codecs/one_bit.hpp"
#include "kernels/codecs/terngrad.hpp"
#include "kernels/compressor.hpp"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels {
namespace {

constexpr double kUnit = 0x1p-24;  // fp32's unit roundoff

CompressorSpec spec_of(const std::string& kind, std::int64_t bucket = 0, std::uint64_t seed = 0) {
  CompressorSpec s{.kind = kind, .seed = seed};
  if (kind == "one_bit") s.settings = OneBitSettings{.bucket = bucket};
  else if (kind == "terngrad") s.settings = TernGradSettings{.bucket = bucket};
  else if (bucket != 0) ADD_FAILURE() << kind << " takes no bucket";
  return s;
}

// `count` elements of `t` from byte `offset` of the payload, as a tensor.
at::Tensor bytes_at(const Payload& p, std::int64_t offset, std::int64_t count, at::ScalarType t) {
  at::Tensor out = at::empty({count}, t);
  if (count > 0)
    std::memcpy(out.data_ptr(), static_cast<const std::uint8_t*>(p.bytes.data_ptr()) + offset,
                static_cast<std::size_t>(count) * c10::elementSize(t));
  return out;
}

at::Tensor random_input(std::int64_t n, std::uint64_t seed, at::ScalarType t = at::kFloat) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn({n}, gen, at::kFloat).to(t);
}

std::int64_t total(const std::vector<std::int64_t>& sizes) {
  std::int64_t n = 0;
  for (auto s : sizes) n += s;
  return n;
}

// The tensors cut at the flat buffer's multiples of B (B = 0: the tensors themselves):
// the pieces that each have their own means or scale, by hand.
std::vector<std::int64_t> pieces_of(const std::vector<std::int64_t>& tensors, std::int64_t B) {
  if (B == 0) return tensors;
  std::vector<std::int64_t> pieces;
  std::int64_t at_ = 0;
  for (auto t : tensors) {
    std::int64_t lo = at_;
    for (std::int64_t cut = (at_ / B + 1) * B; cut < at_ + t; cut += B) {
      pieces.push_back(cut - lo);
      lo = cut;
    }
    pieces.push_back(at_ + t - lo);
    at_ += t;
  }
  return pieces;
}

// Packed signs: bit j of word w set iff x[32w + j] < 0.
at::Tensor ref_sign_words(const at::Tensor& x) {
  const std::int64_t n = x.numel(), W = (n + 31) / 32;
  at::Tensor neg = at::zeros({W * 32}, at::kLong);
  neg.narrow(0, 0, n).copy_(x.to(at::kFloat).lt(0).to(at::kLong));
  at::Tensor weights = at::pow(at::full({32}, 2, at::kLong), at::arange(32, at::kLong));
  return (neg.view({W, 32}) * weights).sum(1).to(at::kInt);  // wraps to the uint32 bit pattern
}

// The uniforms of a tensor of m elements whose draws come from stream (seed, round, l).
at::Tensor uniforms(std::uint64_t seed, std::uint64_t round, std::int64_t l, std::int64_t m) {
  std::vector<float> u(static_cast<std::size_t>(m));
  const std::uint64_t key = detail::stream_key(seed, round, static_cast<std::uint64_t>(l));
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = detail::uniform24(key, static_cast<std::uint32_t>(i));
  return at::tensor(u, at::kFloat);
}

// One element, odd lengths, a tensor of negatives only (33), one of zeros (100), an empty
// one, and tensors crossing 1024-element chunks and (with buckets) bucket boundaries.
const std::vector<std::int64_t> kTensors{1, 7, 33, 100, 0, 1025, 4099};
const std::vector<std::int64_t> kBuckets{0, 32, 1024};

at::Tensor awkward_input(std::uint64_t seed, at::ScalarType dtype) {
  at::Tensor x = random_input(total(kTensors), seed);
  x.narrow(0, 8, 33).abs_().neg_();
  x.narrow(0, 41, 100).zero_();
  return x.to(dtype);
}

// decompress_add(p, 0.5, acc) is acc + 0.5 * decoded, elementwise in fp32.
void expect_add_is_weighted_decode(Compressor& c, const Payload& p, const at::Tensor& decoded_fp32,
                                   at::ScalarType dtype) {
  const std::int64_t n = decoded_fp32.numel();
  const at::Tensor before = random_input(n, 404, dtype);
  at::Tensor acc = before.clone();
  c.decompress_add(p, 0.5, acc);
  EXPECT_TRUE(at::equal(acc, (before.to(at::kFloat) + decoded_fp32 * 0.5).to(dtype)));
}

// --- one_bit ------------------------------------------------------------------------------

// Each piece (tensor, or bucket of it) decodes to where(x < 0, mean-, mean+) with the
// payload's means, bit for bit; the means are the ATen means of each side to the error of
// an fp32 sum in the canonical order (cpu/common.hpp): every term passes through at most
// 32 lane additions, 5 lane folds and ceil(log2(chunks)) pairwise folds, and as the
// terms of a side share a sign, the error is at most that depth times 2^-24 of the sum;
// the division rounds once more. Payload: 2L fp32 + 32 ceil(n/32) bits.
TEST(OneBit, DecodesToTheMeansOfEachPiecesSides) {
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (std::int64_t B : kBuckets) {
      SCOPED_TRACE(::testing::Message() << c10::toString(dtype) << ", bucket " << B);
      const at::Tensor x = awkward_input(3 + static_cast<std::uint64_t>(B), dtype);
      const auto pieces = pieces_of(kTensors, B);
      const auto L = static_cast<std::int64_t>(pieces.size());
      const std::int64_t n = x.numel(), W = (n + 31) / 32;
      Compressor c(spec_of("one_bit", B));
      Payload p;
      c.compress(x, kTensors, p);
      ASSERT_EQ(p.bytes.numel(), 8 * L + 4 * W);
      EXPECT_EQ(c.payload_bytes(kTensors, dtype), 8 * L + 4 * W);
      EXPECT_TRUE(at::equal(bytes_at(p, 8 * L, W, at::kInt), ref_sign_words(x)));
      const at::Tensor mean_up = bytes_at(p, 0, L, at::kFloat), mean_down = bytes_at(p, 4 * L, L, at::kFloat);
      at::Tensor want = at::empty({n});
      std::int64_t off = 0;
      for (std::int64_t j = 0; j < L; ++j) {
        const std::int64_t m = pieces[j];
        const at::Tensor piece = x.narrow(0, off, m).to(at::kDouble);
        const at::Tensor negative = piece.lt(0);
        const std::int64_t n_down = negative.sum().item<std::int64_t>(), n_up = m - n_down;
        const double ref_up = n_up > 0 ? piece.masked_select(negative.logical_not()).sum().item<double>() / n_up : 0.0;
        const double ref_down = n_down > 0 ? piece.masked_select(negative).sum().item<double>() / n_down : 0.0;
        const double depth = 32 + 5 + std::ceil(std::log2(m / 1024.0 + 2)) + 1;
        EXPECT_NEAR(mean_up[j].item<float>(), ref_up, depth * kUnit * std::abs(ref_up)) << "piece " << j;
        EXPECT_NEAR(mean_down[j].item<float>(), ref_down, depth * kUnit * std::abs(ref_down)) << "piece " << j;
        want.narrow(0, off, m).copy_(at::where(negative, mean_down[j], mean_up[j]));
        off += m;
      }
      at::Tensor dense = at::empty({n}, dtype);
      c.decompress(p, dense);
      EXPECT_TRUE(at::equal(dense, want.to(dtype)));
      expect_add_is_weighted_decode(c, p, want, dtype);
    }
  }
}

// The canonical order of a piece's sum (kernels/cpu/common.hpp), written out for one
// side: chunks of 1024 at the buffer's multiples of 1024, 32 rows of 32 lanes; per
// (piece, chunk), lane l sums its elements row by row (others count +0) and the lanes
// fold as a warp does; a piece's chunk partials fold pairwise, level by level.
template <class Part>
std::vector<float> canonical_sums(const at::Tensor& x, const std::vector<std::int64_t>& pieces, Part part) {
  const at::Tensor xf = x.to(at::kFloat).contiguous();
  const float* v = xf.data_ptr<float>();
  std::vector<float> sums;
  std::int64_t a = 0;
  for (const std::int64_t size : pieces) {
    const std::int64_t b = a + size;
    std::vector<float> partials;
    for (std::int64_t base = a / 1024 * 1024; base < b; base += 1024) {
      float lane[32] = {};
      for (int r = 0; r < 32; ++r)
        for (int l = 0; l < 32; ++l) {
          const std::int64_t i = base + 32 * r + l;
          lane[l] += i >= a && i < b ? part(v[i]) : 0.0f;
        }
      for (int off = 16; off >= 1; off /= 2)
        for (int l = 0; l < off; ++l) lane[l] += lane[l + off];
      partials.push_back(lane[0]);
    }
    while (partials.size() > 1) {
      std::vector<float> up;
      for (std::size_t i = 0; i + 1 < partials.size(); i += 2) up.push_back(partials[i] + partials[i + 1]);
      if (partials.size() % 2) up.push_back(partials.back());
      partials = up;
    }
    sums.push_back(partials.empty() ? 0.0f : partials[0]);
    a = b;
  }
  return sums;
}

// The means are the canonical sums over the side's count, bit for bit (what makes the
// CUDA path's bytes equal the CPU's), for pieces inside one chunk, across chunks, in the
// tail, and cut by buckets smaller and larger than a chunk.
TEST(OneBit, MeansFollowTheCanonicalOrderBitForBit) {
  const std::vector<std::vector<std::int64_t>> layouts{
      {5000}, {1, 33, 0, 1025, 7000, 5}, {512, 512, 512, 512, 100, 2000}, {31, 33, 960, 3000, 17}};
  for (const auto& tensors : layouts) {
    for (std::int64_t B : {std::int64_t{0}, std::int64_t{32}, std::int64_t{2048}}) {
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        SCOPED_TRACE(::testing::Message() << tensors.size() << " tensors, bucket " << B << ", " << c10::toString(dtype));
        const at::Tensor x = random_input(total(tensors), 80 + static_cast<std::uint64_t>(tensors.size()), dtype);
        const auto pieces = pieces_of(tensors, B);
        const auto L = static_cast<std::int64_t>(pieces.size());
        Compressor c(spec_of("one_bit", B));
        Payload p;
        c.compress(x, tensors, p);
        const auto up = canonical_sums(x, pieces, [](float v) { return v < 0.0f ? 0.0f : v; });
        const auto down = canonical_sums(x, pieces, [](float v) { return v < 0.0f ? v : 0.0f; });
        const at::Tensor mean_up = bytes_at(p, 0, L, at::kFloat), mean_down = bytes_at(p, 4 * L, L, at::kFloat);
        std::int64_t off = 0;
        for (std::int64_t j = 0; j < L; ++j) {
          const std::int64_t n_down = x.narrow(0, off, pieces[j]).lt(0).sum().item<std::int64_t>();
          const std::int64_t n_up = pieces[j] - n_down;
          EXPECT_EQ(mean_up[j].item<float>(), n_up > 0 ? up[j] / static_cast<float>(n_up) : 0.0f) << "piece " << j;
          EXPECT_EQ(mean_down[j].item<float>(), n_down > 0 ? down[j] / static_cast<float>(n_down) : 0.0f)
              << "piece " << j;
          off += pieces[j];
        }
      }
    }
  }
}

// Pieces of m consecutive integers j - k (j = 0..m-1) have side means in closed form: the
// k negatives -1..-k average -(k + 1) / 2, the m - k others 0..m-k-1 average
// (m - k - 1) / 2, and a side with no element sends 0 (k = 0; k = m). All exact in fp32.
TEST(OneBit, MeansOfConsecutiveIntegersAreTheirClosedForm) {
  const std::vector<std::int64_t> tensors{40, 77, 32};
  const std::int64_t B = 32;
  const auto pieces = pieces_of(tensors, B);  // 32, 8 | 24, 32, 21 | 11, 21
  ASSERT_EQ(pieces, (std::vector<std::int64_t>{32, 8, 24, 32, 21, 11, 21}));
  const std::vector<std::int64_t> negatives{0, 8, 3, 32, 10, 1, 4};  // k per piece: none, all, some
  const std::int64_t n = total(tensors);
  at::Tensor x = at::empty({n}), want = at::empty({n});
  std::vector<float> want_up, want_down;
  std::int64_t off = 0;
  for (std::size_t q = 0; q < pieces.size(); ++q) {
    const std::int64_t m = pieces[q], k = negatives[q];
    x.narrow(0, off, m).copy_(at::arange(m, at::kFloat) - static_cast<float>(k));
    want_up.push_back(m > k ? static_cast<float>(m - k - 1) / 2 : 0.0f);
    want_down.push_back(k > 0 ? -static_cast<float>(k + 1) / 2 : 0.0f);
    want.narrow(0, off, m).copy_(at::where(x.narrow(0, off, m).lt(0), want_down.back(), want_up.back()));
    off += m;
  }
  Compressor c(spec_of("one_bit", B));
  Payload p;
  c.compress(x, tensors, p);
  const auto L = static_cast<std::int64_t>(pieces.size());
  EXPECT_TRUE(at::equal(bytes_at(p, 0, L, at::kFloat), at::tensor(want_up, at::kFloat)));
  EXPECT_TRUE(at::equal(bytes_at(p, 4 * L, L, at::kFloat), at::tensor(want_down, at::kFloat)));
  at::Tensor dense = at::empty({n});
  c.decompress(p, dense);
  EXPECT_TRUE(at::equal(dense, want));
}

// 1-bit SGD with error feedback: compress_feedback is memory += x; q = C(memory);
// memory -= decode(q), bit for bit; and because each side decodes to its own mean, the
// quantization error left in memory sums to zero over each piece, to rounding: n+ * fl(S+ /
// n+) is within (depth + 1) 2^-24 |S+| of S+ (as above), each memory element rounds once
// more (2^-24 of itself), and the sums here are in double.
TEST(OneBit, ErrorFeedbackLeavesEachPieceAZeroSumError) {
  const std::vector<std::int64_t> tensors{300, 5000, 77};
  const std::int64_t B = 1024, n = total(tensors);
  Compressor fused(spec_of("one_bit", B)), unfused(spec_of("one_bit", B));
  const at::Tensor g = random_input(n, 21);
  at::Tensor memory = random_input(n, 22) * 0.1, by_hand = memory.clone();
  Payload p, q;
  fused.compress_feedback(memory, g, tensors, p);
  by_hand.add_(g);
  unfused.compress(by_hand, tensors, q);
  const at::Tensor before = by_hand.clone();  // memory + g, what was compressed
  unfused.decompress_add(q, -1.0, by_hand);
  EXPECT_TRUE(at::equal(p.bytes, q.bytes));
  EXPECT_TRUE(at::equal(memory, by_hand));
  std::int64_t off = 0;
  for (auto m : pieces_of(tensors, B)) {
    const at::Tensor compressed = before.narrow(0, off, m).to(at::kDouble);
    const at::Tensor error = memory.narrow(0, off, m).to(at::kDouble);
    const double depth = 32 + 5 + std::ceil(std::log2(m / 1024.0 + 2)) + 2;
    const double bound = depth * kUnit * compressed.abs().sum().item<double>() + kUnit * error.abs().sum().item<double>();
    EXPECT_LE(std::abs(error.sum().item<double>()), bound) << "piece at " << off;
    off += m;
  }
}

// --- terngrad -------------------------------------------------------------------------------

// With the same uniforms (kernels/detail/hash.hpp), the ATen formula
// s * sign(x) * [u < |x| / s], s = max |x| of the piece, gives the decoded tensor exactly
// (a piece of zeros: zeros); the payload is L fp32 scales (the maxima) + 2 bits per element.
TEST(TernGrad, MatchesAtenFormulaWithSameUniforms) {
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (std::int64_t B : kBuckets) {
      SCOPED_TRACE(::testing::Message() << c10::toString(dtype) << ", bucket " << B);
      const at::Tensor x = awkward_input(5 + static_cast<std::uint64_t>(B), dtype);
      const auto pieces = pieces_of(kTensors, B);
      const auto L = static_cast<std::int64_t>(pieces.size());
      const std::int64_t n = x.numel();
      Compressor c(spec_of("terngrad", B, 1234));
      c.set_round(17);
      Payload p;
      c.compress(x, kTensors, p);
      EXPECT_EQ(p.round, 17U);
      ASSERT_EQ(p.bytes.numel(), 4 * L + 4 * ((n + 15) / 16));
      EXPECT_EQ(c.payload_bytes(kTensors, dtype), 4 * L + 4 * ((n + 15) / 16));
      const at::Tensor scales = bytes_at(p, 0, L, at::kFloat);
      at::Tensor want = at::empty({n});
      std::int64_t off = 0;
      for (std::int64_t j = 0; j < L; ++j) {
        const std::int64_t m = pieces[j];
        const at::Tensor piece = x.narrow(0, off, m).to(at::kFloat);
        const float s = m > 0 ? piece.abs().max().item<float>() : 0.0f;
        EXPECT_EQ(scales[j].item<float>(), s) << "piece " << j;
        const at::Tensor keep = uniforms(1234, 17, j, m).lt(piece.abs() / at::full({m}, s));
        const at::Tensor signed_scale = at::where(piece.lt(0), at::full({m}, -s), at::full({m}, s));
        want.narrow(0, off, m).copy_(at::where(keep, signed_scale, at::zeros({m})));
        off += m;
      }
      at::Tensor dense = at::empty({n}, dtype);
      c.decompress(p, dense);
      EXPECT_TRUE(at::equal(dense, want.to(dtype)));
      EXPECT_TRUE(dense.narrow(0, 41, 100).eq(0).all().item<bool>());  // the zero tensor
      expect_add_is_weighted_decode(c, p, want, dtype);
    }
  }
}

// E[decoded] = x: the mean over 3000 seeds is within 5 standard errors of x, the decode
// being s sign(x) b with b ~ Bernoulli(|x| / s), of variance |x| (s - |x|). The draw's
// probability is |x| / s rounded to fp32 and then up to the uniforms' 2^-24 grid: a bias
// of at most 2 s 2^-24, allowed for.
TEST(TernGrad, UnbiasedOverSeeds) {
  const std::vector<std::int64_t> tensors{64, 136};
  const std::int64_t B = 32, n = total(tensors), seeds = 3000;
  const at::Tensor x = random_input(n, 9);
  at::Tensor sum = at::zeros({n}, at::kDouble), dense = at::empty({n});
  Payload p;
  for (std::int64_t r = 0; r < seeds; ++r) {
    Compressor c(spec_of("terngrad", B, 1000 + static_cast<std::uint64_t>(r)));
    c.compress(x, tensors, p);
    c.decompress(p, dense);
    sum += dense.to(at::kDouble);
  }
  at::Tensor scale = at::empty({n}, at::kDouble);
  std::int64_t off = 0;
  for (auto m : pieces_of(tensors, B)) {
    scale.narrow(0, off, m).fill_(x.narrow(0, off, m).abs().max().item<double>());
    off += m;
  }
  const at::Tensor mag = x.to(at::kDouble).abs();
  const at::Tensor standard_error = (mag * (scale - mag) / static_cast<double>(seeds)).sqrt();
  const at::Tensor bound = 5 * standard_error + 2 * kUnit * scale;
  EXPECT_TRUE((sum / static_cast<double>(seeds) - x.to(at::kDouble)).abs().le(bound).all().item<bool>());
}

// A NaN or Inf makes its piece's scale non-finite and the whole piece decode to NaN (as
// QSGD's norm); the other pieces are untouched.
TEST(TernGrad, NonFiniteScaleDecodesItsPieceToNaN) {
  const std::vector<std::int64_t> tensors{100, 100, 200};
  const at::Tensor x = random_input(400, 2);
  at::Tensor y = x.clone();
  y[150] = std::numeric_limits<float>::quiet_NaN();
  y[250] = -std::numeric_limits<float>::infinity();
  Compressor c(spec_of("terngrad", 0, 4)), clean(spec_of("terngrad", 0, 4));
  Payload p, q;
  c.compress(y, tensors, p);
  clean.compress(x, tensors, q);
  const at::Tensor scales = bytes_at(p, 0, 3, at::kFloat);
  EXPECT_TRUE(std::isnan(scales[1].item<float>()));
  EXPECT_TRUE(std::isinf(scales[2].item<float>()));
  at::Tensor dense = at::empty({400}), clean_dense = at::empty({400});
  c.decompress(p, dense);
  clean.decompress(q, clean_dense);
  EXPECT_TRUE(at::equal(dense.narrow(0, 0, 100), clean_dense.narrow(0, 0, 100)));
  EXPECT_TRUE(dense.narrow(0, 100, 300).isnan().all().item<bool>());
}

// --- natural --------------------------------------------------------------------------------

// The rounding of kernels/detail/quantizers.hpp written with ATen in double: lower =
// 2^floor(log2 |x|), up with probability (|x| - lower) / lower (below 2^-126: lower = 0,
// the interval [0, 2^-126)), the sign kept, 0 -> 0.
at::Tensor natural_reference(const at::Tensor& x, const at::Tensor& u) {
  const at::Tensor xd = x.to(at::kDouble), mag = xd.abs();
  const double min_normal = std::numeric_limits<float>::min();
  const at::Tensor normal = mag.ge(min_normal);
  const at::Tensor lower = at::where(normal, at::exp2(at::floor(at::log2(mag))), at::zeros_like(mag));
  const at::Tensor width = at::where(normal, lower, at::full_like(mag, min_normal));
  const at::Tensor up = u.to(at::kDouble).lt((mag - lower) / width);
  const at::Tensor rounded = at::where(up, lower + width, lower);
  return at::where(xd.lt(0), -rounded, rounded);
}

// Decoded = the reference with the same uniforms, bit for bit, for every dtype (fp16 and
// bf16 inputs rounded as their fp32 values, decoded to their dtype); the payload is the
// sign words then one byte per element, the IEEE exponent field of the rounded value:
// 32 ceil(n/32) + 8n bits.
TEST(Natural, MatchesAtenFormulaWithSameUniforms) {
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor x = awkward_input(6, dtype);
    const std::int64_t n = x.numel(), W = (n + 31) / 32;
    Compressor c(spec_of("natural", 0, 77));
    c.set_round(3);
    Payload p;
    c.compress(x, kTensors, p);
    ASSERT_EQ(p.bytes.numel(), 4 * W + n);
    EXPECT_EQ(c.payload_bytes(kTensors, dtype), 4 * W + n);
    at::Tensor u = at::empty({n});
    std::int64_t off = 0;
    for (std::size_t l = 0; l < kTensors.size(); ++l) {
      u.narrow(0, off, kTensors[l]).copy_(uniforms(77, 3, static_cast<std::int64_t>(l), kTensors[l]));
      off += kTensors[l];
    }
    const at::Tensor want = natural_reference(x, u).to(at::kFloat);
    EXPECT_TRUE(at::equal(bytes_at(p, 0, W, at::kInt), ref_sign_words(want)));
    EXPECT_TRUE(at::equal(bytes_at(p, 4 * W, n, at::kByte),
                          at::bitwise_and(at::bitwise_right_shift(want.view(at::kInt), 23), 0xFF).to(at::kByte)));
    at::Tensor dense = at::empty({n}, dtype);
    c.decompress(p, dense);
    EXPECT_TRUE(at::equal(dense, want.to(dtype)));
    expect_add_is_weighted_decode(c, p, want, dtype);
  }
}

// fp32's edges over 64 rounds: 0 and -0 send +0 (no -0 ever comes back), exact powers
// of two stay, subnormals round to 0 or +-2^-126, the top binade to +-2^127 or +-Inf
// (2^128), +-Inf stays, NaN stays NaN (sent as sign bit 1, exponent 0); the two cases
// with p = 1/2 are seen both ways.
TEST(Natural, Fp32EdgesFollowThePolicy) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float min_normal = std::numeric_limits<float>::min(), max = std::numeric_limits<float>::max();
  const float tiny = std::numeric_limits<float>::denorm_min(), big_subnormal = min_normal - tiny;
  struct Edge {
    float value;
    std::vector<float> allowed;  // what it may decode to
    bool both_ways;              // p = 1/2: 64 rounds see both
  };
  const std::vector<Edge> edges{
      {0.0f, {0.0f}, false},                                   // 0
      {-0.0f, {0.0f}, false},                                  // 1
      {1.0f, {1.0f}, false},                                   // 2
      {-2.0f, {-2.0f}, false},                                 // 3
      {0.75f, {0.5f, 1.0f}, true},                             // 4
      {min_normal, {min_normal}, false},                       // 5
      {tiny, {0.0f, min_normal}, false},                       // 6: up with p = 2^-23
      {-big_subnormal, {0.0f, -min_normal}, false},            // 7: up with p = 1 - 2^-23
      {-3 * 0x1p-140f, {0.0f, -min_normal}, false},            // 8
      {0x1p127f, {0x1p127f}, false},                           // 9
      {max, {0x1p127f, inf}, false},                           // 10
      {-1.5f * 0x1p127f, {-0x1p127f, -inf}, true},             // 11
      {inf, {inf}, false},                                     // 12
      {-inf, {-inf}, false},                                   // 13
      {nan, {}, false},                                        // 14: NaN
  };
  std::vector<float> v;
  for (const auto& e : edges) v.push_back(e.value);
  const at::Tensor x = at::tensor(v, at::kFloat);
  const auto n = static_cast<std::int64_t>(v.size());
  Compressor c(spec_of("natural", 0, 5));
  Payload p;
  at::Tensor dense = at::empty({n});
  std::vector<std::vector<bool>> seen(edges.size(), std::vector<bool>(2, false));
  for (int round = 0; round < 64; ++round) {
    c.compress(x, {}, p);
    c.decompress(p, dense);
    const float* d = dense.data_ptr<float>();
    for (std::size_t i = 0; i < edges.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "element " << i << " (" << v[i] << "), round " << round);
      if (std::isnan(v[i])) {
        EXPECT_TRUE(std::isnan(d[i]));
        continue;
      }
      if (d[i] == 0.0f) {
        EXPECT_FALSE(std::signbit(d[i])) << "a zero comes back as +0";
      }
      std::size_t which = edges[i].allowed.size();
      for (std::size_t a = 0; a < edges[i].allowed.size(); ++a)
        if (d[i] == edges[i].allowed[a]) which = a;
      ASSERT_LT(which, edges[i].allowed.size()) << "decoded " << d[i];
      seen[i][which] = true;
    }
  }
  for (std::size_t i = 0; i < edges.size(); ++i)
    if (edges[i].both_ways) {
      EXPECT_TRUE(seen[i][0] && seen[i][1]) << "element " << i << " always rounded one way";
    }
  // The wire: zeros are sign 0 and exponent 0, 1.0 exponent 127, +-Inf exponent 255 (and
  // its sign), NaN sign 1 and exponent 0.
  c.compress(x, {}, p);
  const auto signs = static_cast<std::uint32_t>(bytes_at(p, 0, 1, at::kInt).item<int>());
  const at::Tensor exponents = bytes_at(p, 4, n, at::kByte);
  auto exponent = [&](std::int64_t i) { return static_cast<int>(exponents[i].item<std::uint8_t>()); };
  EXPECT_EQ(signs & 3U, 0U);
  EXPECT_EQ(exponent(0), 0);
  EXPECT_EQ(exponent(1), 0);
  EXPECT_EQ(exponent(2), 127);
  EXPECT_EQ((signs >> 12) & 3U, 2U);  // +Inf, -Inf
  EXPECT_EQ(exponent(12), 255);
  EXPECT_EQ(exponent(13), 255);
  EXPECT_EQ((signs >> 14) & 1U, 1U);
  EXPECT_EQ(exponent(14), 0);
}

// E[decoded] = x over 3000 seeds, within 5 standard errors: the decode is lower + width * b,
// b ~ Bernoulli(p), p = (|x| - lower) / width, of variance p (1 - p) width^2 (width =
// lower, or 2^-126 for a subnormal). The 24-bit uniforms make P(b) = p exactly (p is the
// mantissa over 2^23), so the only slack is the double sums' rounding (2^-50 |x| here).
TEST(Natural, UnbiasedOverSeeds) {
  const std::int64_t seeds = 3000;
  at::Tensor x = random_input(64, 10);
  x[0] = 0.75f;                // p = 1/2
  x[1] = -0x1p-130f * 3;       // a subnormal: 0 or -2^-126
  x[2] = 0x1p-127f;            // a subnormal power of two: p = 1/2 too
  x[3] = 4.0f;                 // an exact power: p = 0
  x[4] = 1.0f + 0x1p-23f;      // p = 2^-23
  const std::int64_t n = x.numel();
  at::Tensor sum = at::zeros({n}, at::kDouble), dense = at::empty({n});
  Payload p;
  for (std::int64_t r = 0; r < seeds; ++r) {
    Compressor c(spec_of("natural", 0, 5000 + static_cast<std::uint64_t>(r)));
    c.compress(x, {}, p);
    c.decompress(p, dense);
    sum += dense.to(at::kDouble);
  }
  const at::Tensor mag = x.to(at::kDouble).abs();
  const double min_normal = std::numeric_limits<float>::min();
  const at::Tensor normal = mag.ge(min_normal);
  const at::Tensor lower = at::where(normal, at::exp2(at::floor(at::log2(mag))), at::zeros_like(mag));
  const at::Tensor width = at::where(normal, lower, at::full_like(mag, min_normal));
  const at::Tensor prob = (mag - lower) / width;
  const at::Tensor standard_error = width * (prob * (1 - prob) / static_cast<double>(seeds)).sqrt();
  const at::Tensor bound = 5 * standard_error + 0x1p-50 * mag;
  EXPECT_TRUE((sum / static_cast<double>(seeds) - x.to(at::kDouble)).abs().le(bound).all().item<bool>());
}

// --- both stochastic kinds --------------------------------------------------------------------

// Draws are functions of (seed, round, segment, element): the same seed and round give
// the same bytes; another seed, or the next round, other bytes; set_round replays.
TEST(TernGradAndNatural, SameSeedSameBytesOtherSeedsDiffer) {
  const std::vector<std::int64_t> tensors{1000, 337};
  const at::Tensor x = random_input(total(tensors), 31);
  for (std::string kind : {"terngrad", "natural"}) {
    SCOPED_TRACE(kind);
    Compressor a(spec_of(kind, 0, 8)), b(spec_of(kind, 0, 8)), other(spec_of(kind, 0, 9));
    Payload pa, pb, po, next;
    a.compress(x, tensors, pa);
    b.compress(x, tensors, pb);
    other.compress(x, tensors, po);
    a.compress(x, tensors, next);
    EXPECT_TRUE(at::equal(pa.bytes, pb.bytes));
    EXPECT_FALSE(at::equal(pa.bytes, po.bytes));
    EXPECT_FALSE(at::equal(pa.bytes, next.bytes));
    b.set_round(0);
    b.compress(x, tensors, pb);
    EXPECT_TRUE(at::equal(pa.bytes, pb.bytes));
    at::Tensor da = at::empty({x.numel()}), d_other = at::empty({x.numel()});
    a.decompress(pa, da);
    other.decompress(po, d_other);
    EXPECT_FALSE(at::equal(da, d_other));
  }
}

// payload_bytes for shapes the tests above do not reach: empty buffers and empty tensors
// (one_bit and terngrad still send each piece's header), bucket cuts of a long tensor.
TEST(Quantizers, PayloadBytesAreTheClosedForms) {
  struct Case {
    std::vector<std::int64_t> tensors;
    std::int64_t bucket;
  };
  for (const Case& k : {Case{{0}, 0}, Case{{0, 0, 5}, 0}, Case{{31}, 0}, Case{{32}, 0}, Case{{33, 1}, 0},
                        Case{{100000}, 32}, Case{{1, 64, 1}, 32}, Case{{1 << 20}, 1 << 16}}) {
    const std::int64_t n = total(k.tensors), L = static_cast<std::int64_t>(pieces_of(k.tensors, k.bucket).size());
    SCOPED_TRACE(::testing::Message() << "n " << n << ", L " << L << ", bucket " << k.bucket);
    EXPECT_EQ(Compressor(spec_of("one_bit", k.bucket)).payload_bytes(k.tensors, at::kFloat), 8 * L + 4 * ((n + 31) / 32));
    EXPECT_EQ(Compressor(spec_of("terngrad", k.bucket)).payload_bytes(k.tensors, at::kHalf), 4 * L + 4 * ((n + 15) / 16));
    EXPECT_EQ(Compressor(spec_of("natural")).payload_bytes(k.tensors, at::kBFloat16), 4 * ((n + 31) / 32) + n);
    for (std::string kind : {"one_bit", "terngrad", "natural"}) {
      Compressor c(spec_of(kind, kind == "natural" ? 0 : k.bucket));
      Payload p;
      c.compress(random_input(n, 1), k.tensors, p);
      EXPECT_EQ(p.bytes.numel(), c.payload_bytes(k.tensors, at::kFloat)) << kind;
    }
  }
}

}  // namespace
}  // namespace dtsim::kernels
