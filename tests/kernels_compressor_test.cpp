// Compressors (kernels/compressor.hpp) against plain LibTorch reference computations:
// each case builds the expected payload or decoded tensor with ATen ops and compares,
// bit for bit where the compressor is deterministic, statistically (fixed seeds) where
// it is random.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "kernels/codecs/one_bit.hpp"
#include "kernels/codecs/qsgd.hpp"
#include "kernels/codecs/random_k.hpp"
#include "kernels/codecs/terngrad.hpp"
#include "kernels/codecs/threshold.hpp"
#include "kernels/codecs/top_k.hpp"
#include "kernels/compressor.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/cast.hpp"
#include "kernels/cpu/select.hpp"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels {
namespace {

CompressorSpec spec_of(const std::string& kind) { return {.kind = kind}; }

// A quantizer with per-piece statistics (qsgd, one_bit, terngrad) on buckets of B elements.
CompressorSpec bucketed(const std::string& kind, std::int64_t B) {
  CompressorSpec s = spec_of(kind);
  if (kind == "qsgd") edit_settings<QsgdSettings>(s).bucket = B;
  else if (kind == "one_bit") edit_settings<OneBitSettings>(s).bucket = B;
  else if (kind == "terngrad") edit_settings<TernGradSettings>(s).bucket = B;
  else ADD_FAILURE() << kind << " has no buckets";
  return s;
}

// `count` little-endian 32-bit words (or floats) of the payload from byte `offset`, as a tensor.
at::Tensor words_at(const Payload& p, std::int64_t offset, std::int64_t count, at::ScalarType t = at::kInt) {
  at::Tensor out = at::empty({count}, t);
  if (count > 0) std::memcpy(out.data_ptr(), static_cast<const std::uint8_t*>(p.bytes.data_ptr()) + offset, 4 * count);
  return out;
}

at::Tensor values_at(const Payload& p, std::int64_t offset, std::int64_t count, at::ScalarType t) {
  at::Tensor out = at::empty({count}, t);
  if (count > 0)
    std::memcpy(out.data_ptr(), static_cast<const std::uint8_t*>(p.bytes.data_ptr()) + offset,
                count * static_cast<std::int64_t>(c10::elementSize(t)));
  return out;
}

// Reference top-k: a stable descending sort of |x| (NaN first, ties in index order),
// the first k indices, sorted.
at::Tensor ref_topk_indices(const at::Tensor& seg, std::int64_t k) {
  at::Tensor order = std::get<1>(at::sort(seg.to(at::kFloat).abs(), /*stable=*/true, 0, /*descending=*/true));
  return std::get<0>(at::sort(order.narrow(0, 0, k)));
}

// Reference packed signs: bit j of word w set iff x[32w + j] < 0.
at::Tensor ref_sign_words(const at::Tensor& x) {
  const std::int64_t n = x.numel(), W = (n + 31) / 32;
  at::Tensor neg = at::zeros({W * 32}, at::kLong);
  neg.narrow(0, 0, n).copy_(x.to(at::kFloat).lt(0).to(at::kLong));
  at::Tensor weights = at::pow(at::full({32}, 2, at::kLong), at::arange(32, at::kLong));
  return (neg.view({W, 32}) * weights).sum(1).to(at::kInt);  // wraps to the uint32 bit pattern
}

at::Tensor random_input(std::int64_t n, std::uint64_t seed, at::ScalarType t = at::kFloat) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn({n}, gen, at::kFloat).to(t);
}

const std::vector<std::int64_t> kOddSizes{0, 1, 7, 31, 33, 100, 1023, 1025, 4099};

// --- factory --------------------------------------------------------------------------

// Bad specs are rejected with std::invalid_argument whose message names the field: a
// value out of its range (the kind's own parse reads the settings back), settings of
// another kind, an unknown kind.
TEST(CompressorSpec, FactoryNamesTheBadField) {
  auto expect_field = [](CompressorSpec s, const std::string& field) {
    try {
      make_compressor(s);
      ADD_FAILURE() << "accepted a bad " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).find("CompressorSpec." + field + ":"), 0U) << e.what();
    }
  };
  CompressorSpec s = spec_of("top_k");
  s = with_keep_ratio(s, 1.5);
  expect_field(s, "ratio");
  s = with_keep_ratio(s, std::nan(""));
  expect_field(s, "ratio");
  s = spec_of("qsgd");
  edit_settings<QsgdSettings>(s).levels = 1;
  expect_field(s, "levels");
  edit_settings<QsgdSettings>(s).levels = 257;
  expect_field(s, "levels");
  s = spec_of("threshold");
  edit_settings<ThresholdSettings>(s).threshold = -1;
  expect_field(s, "threshold");
  edit_settings<ThresholdSettings>(s).threshold = std::numeric_limits<double>::infinity();
  expect_field(s, "threshold");
  for (std::int64_t bad : {std::int64_t{-512}, std::int64_t{16}, std::int64_t{513}, std::int64_t{1} << 31}) {
    s = spec_of("qsgd");
    edit_settings<QsgdSettings>(s).bucket = bad;
    expect_field(s, "bucket");
    s = spec_of("one_bit");
    edit_settings<OneBitSettings>(s).bucket = bad;
    expect_field(s, "bucket");
  }
  s = spec_of("sign");
  s.settings = RandomKSettings{.shared_seed = true};  // sign has no fields
  expect_field(s, "settings");
  s = spec_of("top_k");
  s.settings = RandomKSettings{.unbiased = true};  // another kind's struct
  expect_field(s, "settings");
  s = spec_of("top-k");
  expect_field(s, "kind");
}

// The messages name the field, the range and the kind, as a scenario's would.
TEST(CompressorSpec, FactoryMessagesAreTheParsersOwn) {
  auto message = [](const CompressorSpec& s) {
    try {
      make_compressor(s);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message({.kind = "qsgd", .settings = QsgdSettings{.levels = 300}}),
            "CompressorSpec.levels: expected an integer >= 2 and <= 256, got 300 (qsgd)");
  EXPECT_EQ(message({.kind = "terngrad", .settings = TernGradSettings{.bucket = 48}}),
            "CompressorSpec.bucket: expected 0 or a power of two in [32, 2^30], got 48 (terngrad)");
  EXPECT_EQ(message({.kind = "top_k", .settings = QsgdSettings{}}), "CompressorSpec.settings: not top_k's settings struct");
  EXPECT_EQ(message({.kind = "fp16", .settings = TopKSettings{}}),
            "CompressorSpec.settings: fp16 has no fields, and settings were given");
  EXPECT_EQ(message({.kind = "top-k"}).rfind("CompressorSpec.kind: unknown kind \"top-k\" (known: identity, top_k, ", 0), 0U);
  EXPECT_EQ(message({.kind = "random_k", .seed = ~0ULL, .settings = RandomKSettings{.ratio = 1.0}}), "accepted");
}

// k = max(1, floor(numel * ratio)) per non-empty tensor, as the reference computes it.
TEST(CompressorSpec, KPerTensorFollowsTheReference) {
  CompressorSpec s = spec_of("top_k");
  s = with_keep_ratio(s, 0.01);
  Compressor c(s);
  EXPECT_EQ(c.k_for(0), 0);
  EXPECT_EQ(c.k_for(50), 1);
  EXPECT_EQ(c.k_for(100), 1);
  EXPECT_EQ(c.k_for(1000), 10);
  s = with_keep_ratio(s, 0.0);
  EXPECT_EQ(Compressor(s).k_for(10), 1);  // a zero ratio still keeps one element
  s = with_keep_ratio(s, 1.0);
  EXPECT_EQ(Compressor(s).k_for(10), 10);
}

// --- top-k ------------------------------------------------------------------------------

// The payload is [indices][values] per segment block, and equals the reference's
// selection exactly, for odd lengths, several segments and all three dtypes.
TEST(TopK, MatchesSortedReferenceAcrossSegmentsAndDtypes) {
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    std::vector<std::int64_t> segs{1, 7, 0, 33, 1025, 4099, 100000};
    std::int64_t n = 0;
    for (auto s : segs) n += s;
    at::Tensor x = random_input(n, 11, dtype);
    CompressorSpec s = spec_of("top_k");
    s = with_keep_ratio(s, 0.05);
    Compressor c(s);
    Payload p;
    c.compress(x, segs, p);
    std::int64_t K_total = 0;
    for (auto sz : segs) K_total += c.k_for(sz);
    const std::int64_t E = static_cast<std::int64_t>(c10::elementSize(dtype));
    ASSERT_EQ(p.payload_bits(), 8 * (4 + E) * K_total);
    ASSERT_EQ(p.bytes.numel(), c.payload_bytes(segs, dtype));
    at::Tensor idx = words_at(p, 0, K_total).to(at::kLong);
    at::Tensor val = values_at(p, 4 * K_total, K_total, dtype);
    std::int64_t off = 0, koff = 0;
    for (auto sz : segs) {
      const std::int64_t k = c.k_for(sz);
      at::Tensor seg = x.narrow(0, off, sz);
      at::Tensor want = ref_topk_indices(seg, k);
      EXPECT_TRUE(at::equal(idx.narrow(0, koff, k), want)) << "segment of " << sz << " dtype " << dtype;
      EXPECT_TRUE(at::equal(val.narrow(0, koff, k), seg.index_select(0, want)));
      off += sz;
      koff += k;
    }
    // decompress: the kept coordinates, zeros elsewhere; decompress_add adds w times that.
    at::Tensor dense = at::full({n}, 3.0, dtype);
    c.decompress(p, dense);
    at::Tensor mask = dense.ne(0);
    EXPECT_EQ(mask.sum().item<std::int64_t>(), K_total);  // randn has no zeros
    EXPECT_TRUE(at::equal(dense.masked_select(mask), x.masked_select(mask)));
    if (dtype == at::kFloat) {
      at::Tensor acc = at::ones({n});
      c.decompress_add(p, 0.5, acc);
      EXPECT_TRUE(at::equal(acc, at::ones({n}) + dense * 0.5f));
      // contraction: ||x - C(x)||^2 <= (1 - k/n) ||x||^2 per tensor, here overall
      EXPECT_LE((x - dense).pow(2).sum().item<float>(), (1.0 - 0.05) * x.pow(2).sum().item<float>());
    }
  }
}

// Kernel level: k = 0 writes nothing, k = n returns everything in order; ties go to the
// lowest indices; NaN ranks above Inf; -0 and +0 tie.
TEST(TopK, EdgeCasesAtKernelLevel) {
  cpu::SelectWorkspace ws;
  for (std::int64_t n : kOddSizes) {
    if (n == 0) continue;
    at::Tensor x = random_input(n, 3);
    for (std::int64_t k : {std::int64_t{0}, n / 2, n}) {
      std::vector<std::uint32_t> idx(static_cast<std::size_t>(k) + 1, 0xDEADBEEF);
      std::vector<float> val(static_cast<std::size_t>(k) + 1, 42.0f);
      cpu::top_k(x.data_ptr<float>(), n, k, ws, idx.data(), val.data());
      EXPECT_EQ(idx[static_cast<std::size_t>(k)], 0xDEADBEEF) << "wrote past k";
      at::Tensor got = at::tensor(std::vector<std::int64_t>(idx.begin(), idx.begin() + k), at::kLong);
      EXPECT_TRUE(at::equal(got, ref_topk_indices(x, k))) << "n=" << n << " k=" << k;
    }
  }
  // Both selection paths: inputs of up to 1024 elements take nth_element, longer ones the
  // radix select; the same cases, padded with -0.5 .. 0.5 values below everything kept.
  for (std::int64_t n : {std::int64_t{1000}, std::int64_t{8}, std::int64_t{5000}}) {
    // ties: equal magnitudes with mixed signs, k = 10 -> indices 0..9
    if (n >= 10) {
      at::Tensor ties = at::ones({n});
      ties.index_put_({at::arange(0, n, 3)}, -1.0f);
      std::vector<std::uint32_t> idx(10);
      std::vector<float> val(10);
      cpu::top_k(ties.data_ptr<float>(), n, 10, ws, idx.data(), val.data());
      for (std::uint32_t j = 0; j < 10; ++j) EXPECT_EQ(idx[j], j) << "n=" << n;
    }
    // NaN > Inf > finite; +-0 tie
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> special{0.0f, -0.0f, 1.0f, -inf, nan, 2.0f, 0.0f, inf};
    const std::int64_t pad = n - 8;
    for (std::int64_t i = 0; i < pad; ++i) special.push_back(i % 2 == 0 ? 1e-3f : -1e-3f);
    std::vector<std::uint32_t> i3(3);
    std::vector<float> v3(3);
    cpu::top_k(special.data(), n, 3, ws, i3.data(), v3.data());
    EXPECT_EQ(i3, (std::vector<std::uint32_t>{3, 4, 7})) << "n=" << n;
    if (pad == 0) {  // the zeros are the smallest only without the padding
      std::vector<std::uint32_t> i7(7);
      std::vector<float> v7(7);
      cpu::top_k(special.data(), n, 7, ws, i7.data(), v7.data());
      EXPECT_EQ(i7, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 7}));  // of the three zeros, the first two
      EXPECT_TRUE(std::signbit(v7[1]));
    }
  }
}

// Large inputs with few distinct values stress the radix refinement (many candidates,
// ties deep in the low digits); 1000 elements take the small-input path with as many ties.
TEST(TopK, HeavyTiesMatchReference) {
  auto gen = at::detail::createCPUGenerator(5);
  cpu::SelectWorkspace ws;
  for (std::int64_t n : {std::int64_t{300000}, std::int64_t{1000}}) {
    at::Tensor x = at::randint(-20, 20, {n}, gen, at::kFloat) * 0.25f;
    for (std::int64_t k : {std::int64_t{1}, std::int64_t{777}, n / 2, n - 1}) {
      std::vector<std::uint32_t> idx(static_cast<std::size_t>(k));
      std::vector<float> val(static_cast<std::size_t>(k));
      cpu::top_k(x.data_ptr<float>(), x.numel(), k, ws, idx.data(), val.data());
      at::Tensor got = at::tensor(std::vector<std::int64_t>(idx.begin(), idx.end()), at::kLong);
      EXPECT_TRUE(at::equal(got, ref_topk_indices(x, k))) << "n=" << n << " k=" << k;
      EXPECT_TRUE(at::equal(at::tensor(val), x.index_select(0, got))) << "n=" << n << " k=" << k;
    }
  }
}

// Top-k picks its first digit from a sample of the keys when k <= n / 8 (select.cpp: 64
// runs of 16 keys at r * (n - 16) / 64 for n = 65536). Here the sampled keys are the
// large ones, so fewer than k keys reach the sample's digit and the full histogram must
// decide; and a sample that is fair but for k = n / 8 exactly.
TEST(TopK, MisleadingSampleFallsBackToTheFullHistogram) {
  const std::int64_t n = 65536;
  at::Tensor x = at::ones({n});
  for (std::int64_t r = 0; r < 64; ++r) x.narrow(0, r * (n - 16) / 64, 16).fill_(100.0f);
  cpu::SelectWorkspace ws;
  for (std::int64_t k : {std::int64_t{5000}, n / 8}) {
    std::vector<std::uint32_t> idx(static_cast<std::size_t>(k));
    std::vector<float> val(static_cast<std::size_t>(k));
    cpu::top_k(x.data_ptr<float>(), n, k, ws, idx.data(), val.data());
    at::Tensor got = at::tensor(std::vector<std::int64_t>(idx.begin(), idx.end()), at::kLong);
    EXPECT_TRUE(at::equal(got, ref_topk_indices(x, k))) << "k=" << k;
  }
}

// Threshold keeps |x| >= t (and NaN), with per-segment counts on the wire.
TEST(Threshold, MatchesMaskReference) {
  std::vector<std::int64_t> segs{0, 5, 1025, 3000};
  at::Tensor x = random_input(4030, 21);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[8] = -std::numeric_limits<float>::infinity();
  x[9] = 1.5f;  // exactly at the threshold: kept
  CompressorSpec s = spec_of("threshold");
  edit_settings<ThresholdSettings>(s).threshold = 1.5;
  Compressor c(s);
  Payload p;
  c.compress(x, segs, p);
  const std::int64_t L = 4;
  at::Tensor counts = words_at(p, 0, L).to(at::kLong);
  std::int64_t off = 0, total = 0;
  std::vector<at::Tensor> want_idx;
  for (std::int64_t j = 0; j < L; ++j) {
    at::Tensor seg = x.narrow(0, off, segs[j]);
    at::Tensor keep = seg.abs().ge(1.5).logical_or(seg.isnan());
    at::Tensor wi = keep.nonzero().flatten();
    EXPECT_EQ(counts[j].item<std::int64_t>(), wi.numel());
    want_idx.push_back(wi);
    total += wi.numel();
    off += segs[j];
  }
  EXPECT_EQ(p.payload_bits(), 32 * L + 64 * total);
  EXPECT_TRUE(at::equal(words_at(p, 4 * L, total).to(at::kLong), at::cat(want_idx)));
  at::Tensor dense = at::empty({4030});
  c.decompress(p, dense);
  at::Tensor keep_all = x.abs().ge(1.5).logical_or(x.isnan());
  at::Tensor want = at::where(keep_all, x, at::zeros_like(x));
  EXPECT_TRUE(at::equal(dense.isnan(), want.isnan()));
  EXPECT_TRUE(at::equal(at::nan_to_num(dense), at::nan_to_num(want)));
}

// What a sparse payload says it sent (Compressor::sent_indices, sent_count) is, per
// segment, the reference's kept coordinates: top-k's sorted top magnitudes, threshold's
// mask (whose counts lead its payload); a kind that sends no indices is refused, and a
// threshold payload whose count exceeds its segment too.
TEST(Compressor, SentIndicesAreTheKeptCoordinates) {
  const std::vector<std::int64_t> segs{5, 1025, 0, 3000};
  const at::Tensor x = random_input(4030, 23);
  auto check = [&](Compressor& c, const std::vector<at::Tensor>& want) -> Payload {
    Payload p;
    c.compress(x, segs, p);
    const auto sent = c.sent_indices(p);
    EXPECT_EQ(sent.counts.size(), segs.size()) << c.kind().name;
    std::int64_t at_index = 0;
    for (std::size_t s = 0; s < std::min(segs.size(), sent.counts.size()); ++s) {
      EXPECT_EQ(sent.counts[s], want[s].numel()) << c.kind().name << " segment " << s;
      const std::vector<std::uint32_t> got(sent.indices.begin() + at_index,
                                           sent.indices.begin() + at_index + sent.counts[s]);
      const at::Tensor got_t = at::tensor(std::vector<std::int64_t>(got.begin(), got.end()), at::kLong);
      EXPECT_TRUE(at::equal(got_t, want[s])) << c.kind().name << " segment " << s;
      at_index += sent.counts[s];
    }
    EXPECT_EQ(c.sent_count(p), at_index) << c.kind().name;
    return p;
  };
  Compressor top(with_keep_ratio(spec_of("top_k"), 0.05));
  std::vector<at::Tensor> want_top, want_threshold;
  std::int64_t off = 0;
  for (auto n : segs) {
    const at::Tensor seg = x.narrow(0, off, n);
    want_top.push_back(ref_topk_indices(seg, top.k_for(n)));
    want_threshold.push_back(seg.abs().ge(1.0).nonzero().flatten());
    off += n;
  }
  check(top, want_top);
  CompressorSpec ts = spec_of("threshold");
  edit_settings<ThresholdSettings>(ts).threshold = 1.0;
  Compressor threshold(ts);
  Payload tp = check(threshold, want_threshold);
  std::uint32_t too_many = 6;  // segment 0 has 5 elements
  std::memcpy(tp.bytes.data_ptr(), &too_many, 4);
  try {
    threshold.sent_indices(tp);
    ADD_FAILURE() << "a count beyond its segment was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("segment 0 claims 6 of its 5 elements"), std::string::npos) << e.what();
  }

  CompressorSpec shared = with_keep_ratio(spec_of("random_k"), 0.1);
  edit_settings<RandomKSettings>(shared).shared_seed = true;
  Compressor values_only(shared), sign(spec_of("sign"));
  for (Compressor* c : {&values_only, &sign}) {
    Payload p;
    c->compress(x, segs, p);
    EXPECT_THROW(c->sent_indices(p), std::invalid_argument) << c->kind().name;
    std::int64_t kept = 0;
    for (auto n : segs) kept += c->k_for(n);
    EXPECT_EQ(c->sent_count(p), kept) << c->kind().name;
  }
}

// --- random-k ----------------------------------------------------------------------------

// Indices are distinct, increasing and in range; the same seed and round give the same
// payload, another seed another; with a shared seed the indices are not sent and the
// receiver (another Compressor with the same seed) rebuilds them.
TEST(RandomK, DeterministicDistinctAndSharedSeedDecodes) {
  std::vector<std::int64_t> segs{1, 31, 1000, 4099};
  at::Tensor x = random_input(5131, 8);
  CompressorSpec s = spec_of("random_k");
  s = with_keep_ratio(s, 0.1);
  s.seed = 99;
  Compressor a(s), b(s);
  Payload pa, pb;
  a.compress(x, segs, pa);
  b.compress(x, segs, pb);
  EXPECT_TRUE(at::equal(pa.bytes, pb.bytes));
  s.seed = 100;
  Compressor other(s);
  Payload po;
  other.compress(x, segs, po);
  EXPECT_FALSE(at::equal(pa.bytes, po.bytes));
  std::int64_t K_total = 0;
  for (auto sz : segs) K_total += a.k_for(sz);
  at::Tensor idx = words_at(pa, 0, K_total).to(at::kLong);
  std::int64_t off = 0, koff = 0;
  for (auto sz : segs) {
    const std::int64_t k = a.k_for(sz);
    at::Tensor si = idx.narrow(0, koff, k);
    if (k > 1) {
      EXPECT_TRUE(si.narrow(0, 1, k - 1).gt(si.narrow(0, 0, k - 1)).all().item<bool>());
    }
    EXPECT_TRUE(si.ge(0).logical_and(si.lt(sz)).all().item<bool>());
    EXPECT_TRUE(at::equal(values_at(pa, 4 * K_total + 4 * koff, k, at::kFloat), x.narrow(0, off, sz).index_select(0, si)));
    off += sz;
    koff += k;
  }
  // shared seed: values only, decoded at the same coordinates as the index-carrying payload
  CompressorSpec sh = spec_of("random_k");
  sh = with_keep_ratio(sh, 0.1);
  sh.seed = 99;
  edit_settings<RandomKSettings>(sh).shared_seed = true;
  Compressor sender(sh), receiver(sh);
  Payload ps;
  sender.compress(x, segs, ps);
  EXPECT_EQ(ps.payload_bits(), 32 * K_total);
  at::Tensor from_shared = at::empty({5131}), from_full = at::empty({5131});
  receiver.decompress(ps, from_shared);
  a.decompress(pa, from_full);
  EXPECT_TRUE(at::equal(from_shared, from_full));
}

// Each index is kept with probability k/n, and with `unbiased` the decoded vector's mean
// over rounds is x: checked over 4000 rounds with a fixed seed (bounds at ~5 sigma).
TEST(RandomK, UniformAndUnbiasedStatistically) {
  const std::int64_t n = 50, rounds = 4000;
  at::Tensor x = random_input(n, 4);
  CompressorSpec s = spec_of("random_k");
  s = with_keep_ratio(s, 0.2);  // k = 10
  edit_settings<RandomKSettings>(s).unbiased = true;
  s.seed = 7;
  Compressor c(s);
  Payload p;
  at::Tensor sum = at::zeros({n}), hits = at::zeros({n}), dense = at::empty({n});
  for (std::int64_t r = 0; r < rounds; ++r) {
    c.compress(x, {}, p);
    c.decompress(p, dense);
    sum += dense;
    hits += dense.ne(0).to(at::kFloat);
  }
  const double pk = 0.2, sd_hits = std::sqrt(rounds * pk * (1 - pk));
  EXPECT_LT((hits - rounds * pk).abs().max().item<float>(), 5 * sd_hits);
  // mean of (n/k) x_i B_i: variance x_i^2 (1/p - 1) / rounds
  at::Tensor sd_mean = x.abs() * std::sqrt((1 / pk - 1) / rounds);
  EXPECT_TRUE(((sum / rounds) - x).abs().le(5 * sd_mean + 1e-6).all().item<bool>());
}

// --- sign family --------------------------------------------------------------------------

// Sign words equal the reference packing (x < 0 sets the bit: 0, -0 and NaN encode +1),
// payload_bits = 32 ceil(n/32), and the decoder gives where(x < 0, -1, +1).
TEST(Sign, PacksLikeReferenceAndDecodesPlusMinusOne) {
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (std::int64_t n : kOddSizes) {
      at::Tensor x = random_input(n, 30 + n, dtype);
      if (n > 5) {
        x[0] = 0.0f;
        x[1] = -0.0f;
        x[2] = std::numeric_limits<float>::quiet_NaN();
        x[3] = -std::numeric_limits<float>::infinity();
      }
      Compressor c(spec_of("sign"));
      Payload p;
      c.compress(x, {}, p);
      const std::int64_t W = (n + 31) / 32;
      ASSERT_EQ(p.payload_bits(), 32 * W);
      EXPECT_TRUE(at::equal(words_at(p, 0, W), ref_sign_words(x))) << "n=" << n << " " << dtype;
      at::Tensor dense = at::empty({n}, dtype);
      c.decompress(p, dense);
      at::Tensor want = at::where(x.lt(0), at::full({n}, -1.0, dtype), at::full({n}, 1.0, dtype));
      EXPECT_TRUE(at::equal(dense, want));
    }
  }
}

// Scaled sign: one fp32 scale per tensor, ||x_l||_1 / n_l (to fp32 summation error), and
// decoded = scale_l * sign; payload_bits = 32 L + 32 ceil(n/32), the reference's n_bits.
TEST(ScaledSign, ScalesAreMeanAbsPerSegment) {
  std::vector<std::int64_t> segs{3, 0, 1024, 29, 5000, 2047};
  std::int64_t n = 0;
  for (auto s : segs) n += s;
  const auto L = static_cast<std::int64_t>(segs.size());
  at::Tensor x = random_input(n, 77);
  Compressor c(spec_of("scaled_sign"));
  Payload p;
  c.compress(x, segs, p);
  ASSERT_EQ(p.payload_bits(), 32 * L + 32 * ((n + 31) / 32));
  at::Tensor scales = words_at(p, 0, L, at::kFloat);
  EXPECT_TRUE(at::equal(words_at(p, 4 * L, (n + 31) / 32), ref_sign_words(x)));
  std::int64_t off = 0;
  at::Tensor want = at::empty({n});
  for (std::int64_t j = 0; j < L; ++j) {
    at::Tensor seg = x.narrow(0, off, segs[j]);
    const double ref = segs[j] ? seg.to(at::kDouble).abs().mean().item<double>() : 0.0;
    EXPECT_NEAR(scales[j].item<float>(), ref, 1e-6 * std::abs(ref)) << "segment " << j;
    want.narrow(0, off, segs[j]).copy_(at::where(seg.lt(0), -scales[j], scales[j]));
    off += segs[j];
  }
  at::Tensor dense = at::empty({n});
  c.decompress(p, dense);
  EXPECT_TRUE(at::equal(dense, want));
  // a NaN makes its tensor's scale NaN, and only that tensor's
  x[5] = std::numeric_limits<float>::quiet_NaN();
  c.compress(x, segs, p);
  at::Tensor s2 = words_at(p, 0, L, at::kFloat);
  EXPECT_TRUE(std::isnan(s2[2].item<float>()));
  EXPECT_EQ(s2[4].item<float>(), scales[4].item<float>());
}

// --- QSGD -----------------------------------------------------------------------------------

// With the same uniforms (kernels/detail/hash.hpp), the ATen formula
// sign(x) * (floor(y) + [u < y - floor(y)]) * norm / s, y = |x| s / norm, gives the
// decoded tensor exactly; the norm is ||x||_2 to fp32 summation error; code width is
// 1 + bit_width(s) bits.
TEST(Qsgd, MatchesAtenFormulaWithSameUniforms) {
  for (int levels : {2, 15, 255, 256}) {
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      std::vector<std::int64_t> segs{1, 63, 64, 65, 0, 3000};
      std::int64_t n = 0;
      for (auto s : segs) n += s;
      const auto L = static_cast<std::int64_t>(segs.size());
      at::Tensor x = random_input(n, 5 + levels, dtype);
      CompressorSpec s = spec_of("qsgd");
      edit_settings<QsgdSettings>(s).levels = levels;
      s.seed = 1234;
      Compressor c(s);
      c.set_round(17);
      Payload p;
      c.compress(x, segs, p);
      EXPECT_EQ(p.round, 17u);
      const int bits = 1 + static_cast<int>(std::ceil(std::log2(levels + 1)));
      ASSERT_EQ(p.payload_bits(), 32 * L + 32 * ((n * bits + 31) / 32)) << levels;
      at::Tensor norms = words_at(p, 0, L, at::kFloat);
      at::Tensor dense = at::empty({n}, dtype);
      c.decompress(p, dense);
      std::int64_t off = 0;
      for (std::int64_t j = 0; j < L; ++j) {
        at::Tensor seg = x.narrow(0, off, segs[j]).to(at::kFloat);
        const float norm = norms[j].item<float>();
        EXPECT_NEAR(norm, seg.to(at::kDouble).norm().item<double>(), 1e-6 * norm + 1e-30);
        std::vector<float> u(static_cast<std::size_t>(segs[j]));
        const std::uint64_t key = detail::stream_key(1234, 17, static_cast<std::uint64_t>(j));
        for (std::size_t i = 0; i < u.size(); ++i) u[i] = detail::uniform24(key, static_cast<std::uint32_t>(i));
        at::Tensor ut = at::tensor(u, at::kFloat);
        at::Tensor y = seg.abs() * (static_cast<float>(levels) / norm);
        at::Tensor fl = y.floor();
        at::Tensor level = (fl + ut.lt(y - fl).to(at::kFloat)).clamp_max(levels);
        at::Tensor mag = level * (norm / static_cast<float>(levels));
        at::Tensor want = at::where(seg.lt(0), -mag, mag).to(dtype);
        EXPECT_TRUE(at::equal(dense.narrow(0, off, segs[j]), want)) << "levels=" << levels << " seg " << j;
        off += segs[j];
      }
    }
  }
}

// The payload is the LSB-first stream of (1 + bit_width(s))-bit codes, level | sign << (B-1),
// with level = floor(y) + [u < y - floor(y)] (clamped to s), bit for bit, for every code
// width (3..10 bits) and segments with full 64-code blocks, partial ones and boundaries
// inside blocks: whichever ISA path packed it (DTSIM_KERNELS_ISA), it is the documented layout.
TEST(Qsgd, PayloadIsTheCodeStreamForEveryWidth) {
  const std::vector<std::int64_t> segs{1000, 320, 37, 0, 4099};
  std::int64_t n = 0;
  for (auto sz : segs) n += sz;
  const auto L = static_cast<std::int64_t>(segs.size());
  at::Tensor x = random_input(n, 77);
  x[5] = -0.0f;
  x[6] = 0.0f;
  const float* xs = x.data_ptr<float>();
  for (int levels : {2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256}) {
    CompressorSpec s = spec_of("qsgd");
    edit_settings<QsgdSettings>(s).levels = levels;
    s.seed = 99;
    Compressor c(s);
    c.set_round(5);
    Payload p;
    c.compress(x, segs, p);
    const int bits = 1 + static_cast<int>(std::bit_width(static_cast<unsigned>(levels)));
    const std::int64_t W = (n * bits + 31) / 32;
    std::vector<std::uint32_t> want(static_cast<std::size_t>(W), 0);
    std::int64_t off = 0, bit = 0;
    for (std::int64_t j = 0; j < L; ++j) {
      const float norm = words_at(p, 4 * j, 1, at::kFloat).item<float>();
      const float inv = static_cast<float>(levels) / norm;
      const std::uint64_t key = detail::stream_key(99, 5, static_cast<std::uint64_t>(j));
      for (std::int64_t i = 0; i < segs[j]; ++i, bit += bits) {
        const float v = xs[off + i];
        const float y = std::fabs(v) * inv;
        const float fl = std::floor(y);
        const float u = detail::uniform24(key, static_cast<std::uint32_t>(i));
        const auto level =
            std::min(static_cast<std::uint32_t>(fl) + (u < y - fl ? 1U : 0U), static_cast<std::uint32_t>(levels));
        const std::uint64_t code = level | (v < 0.0f && level > 0 ? 1U << (bits - 1) : 0U);
        const std::uint64_t placed = code << (bit % 32);
        want[static_cast<std::size_t>(bit / 32)] |= static_cast<std::uint32_t>(placed);
        if (bit % 32 + bits > 32)
          want[static_cast<std::size_t>(bit / 32 + 1)] |= static_cast<std::uint32_t>(placed >> 32);
      }
      off += segs[j];
    }
    at::Tensor got = words_at(p, 4 * L, W);
    EXPECT_EQ(std::memcmp(got.data_ptr(), want.data(), static_cast<std::size_t>(4 * W)), 0) << "levels " << levels;
  }
}

// The generator of kernels/detail/hash.hpp: uniform draws (64-bin chi-square) that do not
// correlate with their neighbours in a round nor with the same element's in the next
// round (|r| < 5 / sqrt(N)); loose bounds, a coarse check of a generator change.
TEST(Qsgd, GeneratorIsUniformAndUncorrelated) {
  const int N = 1 << 16;
  const std::uint64_t key = detail::stream_key(7, 1, 0), next_round = detail::stream_key(7, 2, 0);
  std::vector<double> bins(64, 0.0);
  double lag1 = 0, across = 0;
  float prev = 0;
  for (int i = 0; i < N; ++i) {
    const float u = detail::uniform24(key, static_cast<std::uint32_t>(i));
    ASSERT_TRUE(u >= 0.0f && u < 1.0f);
    bins[static_cast<std::size_t>(u * 64)] += 1;
    if (i > 0) lag1 += (u - 0.5) * (prev - 0.5);
    across += (u - 0.5) * (detail::uniform24(next_round, static_cast<std::uint32_t>(i)) - 0.5);
    prev = u;
  }
  double chi2 = 0;
  for (double b : bins) chi2 += (b - N / 64.0) * (b - N / 64.0) / (N / 64.0);
  EXPECT_LT(chi2, 120.0);  // 63 degrees of freedom: P(chi2 > 120) < 1e-5
  EXPECT_LT(std::abs(lag1 / (N - 1) * 12), 5 / std::sqrt(static_cast<double>(N)));
  EXPECT_LT(std::abs(across / N * 12), 5 / std::sqrt(static_cast<double>(N)));
}

// E[decoded] = x: the mean over 3000 rounds is within 5 sigma of x, where the per-round
// variance of element i is (norm/s)^2 p(1-p) with p the fractional part of y.
TEST(Qsgd, UnbiasedStatistically) {
  const std::int64_t n = 64, rounds = 3000;
  at::Tensor x = random_input(n, 9);
  CompressorSpec s = spec_of("qsgd");
  edit_settings<QsgdSettings>(s).levels = 4;
  s.seed = 3;
  Compressor c(s);
  Payload p;
  at::Tensor sum = at::zeros({n}), dense = at::empty({n});
  for (std::int64_t r = 0; r < rounds; ++r) {
    c.compress(x, {}, p);
    c.decompress(p, dense);
    sum += dense;
  }
  const float norm = x.norm().item<float>();
  at::Tensor y = x.abs() * (4 / norm);
  at::Tensor frac = y - y.floor();
  at::Tensor sd = (norm / 4) * (frac * (1 - frac) / rounds).sqrt();
  EXPECT_TRUE((sum / rounds - x).abs().le(5 * sd + 1e-5).all().item<bool>());
}

// tau_rescale multiplies the wire norm by 1 / (min(d/s^2, sqrt(d)/s) + 1); NaN in a
// tensor decodes that whole tensor to NaN; a zero tensor decodes to zeros.
TEST(Qsgd, TauRescaleAndNonFinitePolicy) {
  at::Tensor x = random_input(400, 2);
  CompressorSpec s = spec_of("qsgd");
  edit_settings<QsgdSettings>(s).levels = 3;
  Compressor plain(s);
  edit_settings<QsgdSettings>(s).tau_rescale = true;
  Compressor tau(s);
  Payload a, b;
  plain.compress(x, {}, a);
  tau.compress(x, {}, b);
  const double d = 400, tau_factor = 1.0 / (std::min(d / 9, std::sqrt(d) / 3) + 1);
  EXPECT_FLOAT_EQ(words_at(b, 0, 1, at::kFloat).item<float>(),
                  static_cast<float>(words_at(a, 0, 1, at::kFloat).item<float>() * tau_factor));
  std::vector<std::int64_t> segs{100, 100, 200};
  at::Tensor y = x.clone();
  y.narrow(0, 100, 100).zero_();
  y[250] = std::numeric_limits<float>::quiet_NaN();
  plain.compress(y, segs, a);
  at::Tensor dense = at::empty({400});
  plain.decompress(a, dense);
  EXPECT_FALSE(dense.narrow(0, 0, 100).isnan().any().item<bool>());
  EXPECT_TRUE(dense.narrow(0, 100, 100).eq(0).all().item<bool>());
  EXPECT_TRUE(dense.narrow(0, 200, 200).isnan().all().item<bool>());
}

// The canonical order of a segment's sum of squares (kernels/cpu/common.hpp), written out:
// chunks of 1024 at the buffer's multiples of 1024, 32 rows of 32 lanes; per (segment,
// chunk), lane l sums its elements row by row (others count +0) and the lanes fold as a
// warp does; a segment's chunk partials fold pairwise, level by level.
std::vector<float> canonical_sums_of_squares(const at::Tensor& x, const std::vector<std::int64_t>& segs) {
  const at::Tensor xf = x.to(at::kFloat).contiguous();
  const float* v = xf.data_ptr<float>();
  std::vector<float> sums;
  std::int64_t a = 0;
  for (const std::int64_t size : segs) {
    const std::int64_t b = a + size;
    std::vector<float> partials;
    for (std::int64_t base = a / 1024 * 1024; base < b; base += 1024) {
      float lane[32] = {};
      for (int r = 0; r < 32; ++r)
        for (int l = 0; l < 32; ++l) {
          const std::int64_t i = base + 32 * r + l;
          const float e = i >= a && i < b ? v[i] : 0.0f;
          lane[l] += e * e;
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

// QSGD's wire norms are sqrt of the canonical sums bit for bit (the CUDA kernels sum in
// the same order), for segments inside one chunk, across chunks, and in the tail.
TEST(Qsgd, NormsFollowTheCanonicalOrderBitForBit) {
  const std::vector<std::vector<std::int64_t>> layouts{
      {5000}, {1, 33, 0, 1025, 7000, 5}, {512, 512, 512, 512, 100, 2000}, {31, 33, 960, 3000, 17}};
  for (const auto& segs : layouts)
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      std::int64_t n = 0;
      for (auto s : segs) n += s;
      const at::Tensor x = random_input(n, 80 + static_cast<std::uint64_t>(segs.size()), dtype);
      Compressor c(spec_of("qsgd"));
      Payload p;
      c.compress(x, segs, p);
      const auto sums = canonical_sums_of_squares(x, segs);
      for (std::size_t s = 0; s < segs.size(); ++s) {
        const float norm = words_at(p, 4 * static_cast<std::int64_t>(s), 1, at::kFloat).item<float>();
        EXPECT_EQ(norm, std::sqrt(sums[s])) << "segment " << s << " of " << segs.size() << ", " << c10::toString(dtype);
      }
    }
}

// QSGD with buckets of B is QSGD on the tensors cut at the flat buffer's multiples of B:
// the single-pass block encoder gives the bytes that the whole-buffer two passes give
// for those pieces as explicit segments (norms, keys and codes alike), for several B
// (below, at and above the 32 K-element block), odd tensor sizes, empty tensors, fp16 and
// bf16 input, tau_rescale and error feedback; the payload holds one norm per piece.
TEST(Qsgd, BucketsAreSegmentsCutAtMultiplesOfTheBucket) {
  const std::vector<std::int64_t> tensors{1, 33, 0, 1025, 70000, 5, 0, 100003, 64};
  std::int64_t n = 0;
  for (auto t : tensors) n += t;
  for (const std::int64_t B : {std::int64_t{32}, std::int64_t{512}, std::int64_t{1} << 15, std::int64_t{1} << 17}) {
    std::vector<std::int64_t> pieces;  // the tensors cut at multiples of B, by hand
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
    for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      for (bool tau : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "bucket " << B << ", " << c10::toString(dtype) << ", tau " << tau);
        const at::Tensor x = random_input(n, 70 + static_cast<std::uint64_t>(B), dtype);
        CompressorSpec s = spec_of("qsgd");
        edit_settings<QsgdSettings>(s).levels = 7;
        s.seed = 11;
        edit_settings<QsgdSettings>(s).tau_rescale = tau;
        Compressor segmented(s);
        edit_settings<QsgdSettings>(s).bucket = B;
        Compressor bucketed(s);
        Payload expected, got;
        segmented.compress(x, pieces, expected);
        bucketed.compress(x, tensors, got);
        EXPECT_TRUE(at::equal(got.bytes, expected.bytes));
        EXPECT_EQ(got.segments, tensors);  // the receiver knows the tensors; it cuts them itself
        EXPECT_EQ(got.bytes.numel(), bucketed.payload_bytes(tensors, dtype));
        EXPECT_EQ(got.bytes.numel(),
                  4 * static_cast<std::int64_t>(pieces.size()) + 4 * ((n * 4 + 31) / 32));  // s = 7: 4-bit codes
        at::Tensor want = at::zeros({n}, dtype), have = at::zeros({n}, dtype);
        segmented.decompress_add(expected, 0.5, want);
        bucketed.decompress_add(got, 0.5, have);
        EXPECT_TRUE(at::equal(have, want));
      }
    }
    // Error feedback (fp32, fused): the same memory and payload as with the explicit pieces.
    CompressorSpec s = spec_of("qsgd");
    s.seed = 3;
    Compressor segmented(s);
    edit_settings<QsgdSettings>(s).bucket = B;
    Compressor bucketed(s);
    const at::Tensor g = random_input(n, 90);
    at::Tensor m1 = random_input(n, 91), m2 = m1.clone();
    Payload p1, p2;
    segmented.compress_feedback(m1, g, pieces, p1);
    bucketed.compress_feedback(m2, g, tensors, p2);
    EXPECT_TRUE(at::equal(p1.bytes, p2.bytes)) << "bucket " << B;
    EXPECT_TRUE(at::equal(m1, m2)) << "bucket " << B;
  }
}

// --- casts and identity -------------------------------------------------------------------

// fp16 / bf16 payloads hold exactly the bits of torch's .to(); NaN follows c10's rule
// (fp16: sign | 0x7E00, bf16: 0x7FC0); decoding gives the exact widening.
TEST(Casts, MatchTorchConversionBitForBit) {
  for (std::int64_t n : kOddSizes) {
    at::Tensor x = random_input(n, 50 + n) * 1000.0f;
    if (n > 8) {
      x[0] = 1e-6f;  // fp16 subnormal
      x[1] = 70000.0f;  // fp16 overflow -> Inf
      x[2] = -std::numeric_limits<float>::quiet_NaN();
      x[3] = 1.0009765625f + 0x1.0p-11f;  // a tie in fp16: rounds to even
      x[4] = std::numeric_limits<float>::denorm_min();
    }
    for (std::string kind : {"fp16", "bf16"}) {
      const auto t = kind == "fp16" ? at::kHalf : at::kBFloat16;
      Compressor c(spec_of(kind));
      Payload p;
      c.compress(x, {}, p);
      ASSERT_EQ(p.payload_bits(), 16 * n);
      at::Tensor bits = values_at(p, 0, n, at::kShort);
      at::Tensor ref = x.to(t);
      at::Tensor ref_bits = at::empty({n}, at::kShort);
      if (n > 0) std::memcpy(ref_bits.data_ptr(), ref.data_ptr(), 2 * n);
      at::Tensor finite = x.isnan().logical_not();
      EXPECT_TRUE(at::equal(bits.masked_select(finite), ref_bits.masked_select(finite))) << n << " " << t;
      if (n > 8) {
        EXPECT_EQ(static_cast<std::uint16_t>(bits[2].item<std::int16_t>()), kind == "fp16" ? 0xFE00 : 0x7FC0);
      }
      at::Tensor dense = at::empty({n});
      c.decompress(p, dense);
      at::Tensor want = ref.to(at::kFloat);
      EXPECT_TRUE(at::equal(at::nan_to_num(dense), at::nan_to_num(want)));
      at::Tensor acc = at::full({n}, 2.0f);
      c.decompress_add(p, -0.5, acc);
      EXPECT_TRUE(at::equal(at::nan_to_num(acc), at::nan_to_num(at::full({n}, 2.0f) + want * -0.5f)));
    }
  }
}

// fp32 values that exercise every branch of the casts: NaN of both signs, +-Inf, fp16 and
// bf16 overflow, subnormals of all three formats, rounding ties, zeros of both signs.
at::Tensor cast_input(std::int64_t n, std::uint64_t seed) {
  at::Tensor x = random_input(n, seed) * 1000.0f;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            70000.0f, 3.4e38f, 1e-6f, -1e-7f, std::numeric_limits<float>::denorm_min(),
                            1.0009765625f + 0x1.0p-11f, 1.0f + 0x1.0p-8f, -0.0f, 0.0f};
  float* p = x.data_ptr<float>();
  for (std::int64_t i = 0; i < n; i += 7) p[i] = specials[(i / 7) % std::size(specials)];
  return x;
}

// The streaming (non-temporal) store paths write the same bytes as the cached ones, for
// every cast and error feedback, at odd sizes, outputs at odd offsets from a 64-byte line
// (the head before the first line boundary goes through the cache) and on several threads.
TEST(Casts, StreamingStoresEqualCachedBitForBit) {
  using cpu::Store;
  const int saved = at::get_num_threads();
  at::set_num_threads(3);
  for (std::int64_t n : {1, 15, 17, 33, 1000, 4099, 200003}) {
    for (std::int64_t shift : {0, 1, 3, 8}) {  // output offset in elements
      SCOPED_TRACE(::testing::Message() << "n " << n << " shift " << shift);
      const at::Tensor x = cast_input(n, 3 + n);
      const float* xp = x.data_ptr<float>();
      std::vector<std::uint16_t> ha(n + 40), hb(n + 40);
      for (bool half : {true, false}) {
        auto cast = half ? cpu::float_to_half : cpu::float_to_bfloat16;
        cast(xp, n, ha.data() + shift, Store::cached);
        cast(xp, n, hb.data() + shift, Store::streaming);
        ASSERT_EQ(std::memcmp(ha.data() + shift, hb.data() + shift, 2 * n), 0) << (half ? "to fp16" : "to bf16");
        auto widen = half ? cpu::half_to_float : cpu::bfloat16_to_float;
        std::vector<float> fa(n + 20), fb(n + 20);
        widen(ha.data() + shift, n, 1.0f, false, fa.data() + shift, Store::cached);
        widen(ha.data() + shift, n, 1.0f, false, fb.data() + shift, Store::streaming);
        ASSERT_EQ(std::memcmp(fa.data() + shift, fb.data() + shift, 4 * n), 0) << (half ? "from fp16" : "from bf16");
        at::Tensor ma = random_input(n, 5 + n) * 0.1f, mb = ma.clone();
        auto feedback = half ? cpu::add_float_to_half_feedback : cpu::add_float_to_bfloat16_feedback;
        feedback(ma.data_ptr<float>(), xp, n, ha.data() + shift, Store::cached);
        feedback(mb.data_ptr<float>(), xp, n, hb.data() + shift, Store::streaming);
        ASSERT_EQ(std::memcmp(ha.data() + shift, hb.data() + shift, 2 * n), 0) << "feedback payload";
        ASSERT_EQ(std::memcmp(ma.data_ptr(), mb.data_ptr(), 4 * n), 0) << "feedback memory";
      }
    }
  }
  at::set_num_threads(saved);
}

// Outputs of kStreamMinBytes and more stream by default (Store::automatic): the payloads,
// decoded buffers and error-feedback memory equal the cached path's and torch's .to().
TEST(Casts, LargeOutputsStreamByDefaultAndMatchTorch) {
  using cpu::Store;
  const std::int64_t n = cpu::kStreamMinBytes / 2 + 4099;  // a 16 MB+ payload, 32 MB+ decoded
  const at::Tensor x = cast_input(n, 11);
  for (std::string kind : {"fp16", "bf16"}) {
    SCOPED_TRACE(kind);
    const bool half = kind == "fp16";
    Compressor c(spec_of(kind));
    Payload p;
    c.compress(x, {}, p);
    at::Tensor cached = at::empty({n}, at::kShort);
    auto* cached_bits = reinterpret_cast<std::uint16_t*>(cached.data_ptr());
    (half ? cpu::float_to_half : cpu::float_to_bfloat16)(x.data_ptr<float>(), n, cached_bits, Store::cached);
    at::Tensor bits = values_at(p, 0, n, at::kShort);
    EXPECT_TRUE(at::equal(bits, cached));
    at::Tensor ref = x.to(half ? at::kHalf : at::kBFloat16);
    at::Tensor ref_bits = at::empty({n}, at::kShort);
    std::memcpy(ref_bits.data_ptr(), ref.data_ptr(), 2 * n);
    const at::Tensor finite = x.isnan().logical_not();
    EXPECT_TRUE(at::equal(bits.masked_select(finite), ref_bits.masked_select(finite)));
    at::Tensor dense = at::empty({n});
    c.decompress(p, dense);
    EXPECT_TRUE(at::equal(at::nan_to_num(dense), at::nan_to_num(ref.to(at::kFloat))));
    at::Tensor memory = random_input(n, 13) * 0.1f, unfused = memory.clone();
    Payload fused;
    Compressor(spec_of(kind)).compress_feedback(memory, x, {}, fused);
    std::vector<std::uint16_t> h(n);
    (half ? cpu::add_float_to_half_feedback : cpu::add_float_to_bfloat16_feedback)(
        unfused.data_ptr<float>(), x.data_ptr<float>(), n, h.data(), Store::cached);
    EXPECT_EQ(std::memcmp(fused.bytes.data_ptr(), h.data(), 2 * n), 0);
    EXPECT_EQ(std::memcmp(memory.data_ptr(), unfused.data_ptr(), 4 * n), 0);
  }
}

TEST(Identity, RoundTripsEveryDtypeExactly) {
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    at::Tensor x = random_input(1001, 1, dtype);
    Compressor c(spec_of("identity"));
    Payload p;
    c.compress(x, {}, p);
    EXPECT_EQ(p.payload_bits(), 8 * 1001 * static_cast<std::int64_t>(c10::elementSize(dtype)));
    at::Tensor dense = at::empty({1001}, dtype);
    c.decompress(p, dense);
    EXPECT_TRUE(at::equal(dense, x));
  }
}

// --- common properties --------------------------------------------------------------------

// Every kind handles an empty buffer (and empty segments), and rejects segment sizes that
// do not add up, a payload of another kind, and a dense buffer of the wrong size.
TEST(Compressor, EmptyInputsAndMisuse) {
  for (const auto& info : compressor_kinds()) {
    const std::string kind(info.name);
    Compressor c(spec_of(kind));
    Payload p;
    at::Tensor empty = at::empty({0});
    std::vector<std::int64_t> zero_segs{0, 0};
    c.compress(empty, zero_segs, p);
    // 32-bit header words per tensor: a scale, norm or count; one_bit's two means
    const std::int64_t per_tensor =
        (kind == "scaled_sign" || kind == "qsgd" || kind == "threshold" || kind == "terngrad") ? 1
        : kind == "one_bit"                                                                        ? 2
                                                                                                    : 0;
    EXPECT_EQ(p.payload_bits(), 32 * 2 * per_tensor) << kind;
    at::Tensor out = at::empty({0});
    c.decompress(p, out);
    std::vector<std::int64_t> bad{3};
    EXPECT_THROW(c.compress(at::ones({4}), bad, p), std::invalid_argument);
    c.compress(at::ones({4}), {}, p);
    at::Tensor wrong = at::empty({5});
    EXPECT_THROW(c.decompress(p, wrong), std::invalid_argument);
    Compressor other(spec_of(kind == "sign" ? "identity" : "sign"));
    at::Tensor four = at::empty({4});
    EXPECT_THROW(other.decompress(p, four), std::invalid_argument);
  }
}

// Reusing one Payload across steps keeps its storage (no allocation once grown) and
// payload_bytes() predicts every fixed-size payload.
TEST(Compressor, ReusesPayloadStorage) {
  CompressorSpec s = spec_of("top_k");
  s = with_keep_ratio(s, 0.1);
  Compressor c(s);
  Payload p;
  at::Tensor x = random_input(10000, 1);
  c.compress(x, {}, p);
  const void* storage = p.bytes.data_ptr();
  for (int step = 0; step < 3; ++step) {
    c.compress(random_input(10000, 2 + step), {}, p);
    EXPECT_EQ(p.bytes.data_ptr(), storage);
  }
  std::vector<std::int64_t> segs{10000};
  EXPECT_EQ(p.bytes.numel(), c.payload_bytes(segs, at::kFloat));
}

// Payloads do not depend on the thread count: the parallel kernels split work into
// parts whose results are combined in a fixed order (300K elements: several parts).
TEST(Compressor, ThreadCountDoesNotChangePayloads) {
  std::vector<std::int64_t> segs{200000, 3, 100000};
  at::Tensor x = random_input(300003, 12);
  const int saved = at::get_num_threads();
  std::vector<CompressorSpec> specs;
  for (const auto& info : compressor_kinds()) specs.push_back(spec_of(std::string(info.name)));
  for (std::string kind : {"qsgd", "one_bit", "terngrad"})  // qsgd's block encoder: blocks spread over the threads
    specs.push_back(bucketed(kind, 1024));
  for (CompressorSpec s : specs) {
    const std::string kind = s.kind;
    if (kind == "threshold") edit_settings<ThresholdSettings>(s).threshold = 2.5;  // its default, 0, keeps everything
    s.seed = 8;
    std::vector<at::Tensor> bytes, decoded;
    for (int threads : {1, 3}) {
      at::set_num_threads(threads);
      Compressor c(s);
      Payload p;
      c.compress(x, segs, p);
      bytes.push_back(p.bytes.clone());
      decoded.push_back(at::empty({300003}));
      c.decompress(p, decoded.back());
    }
    EXPECT_TRUE(at::equal(bytes[0], bytes[1])) << kind;
    EXPECT_TRUE(at::equal(decoded[0], decoded[1])) << kind;
  }
  at::set_num_threads(saved);
}

// --- CUDA versus CPU (runs on a GPU machine only) -------------------------------------------

// Every deterministic kind gives the same payload bytes and the same decoded tensor on
// the GPU as on the CPU, seeded kinds included (same seed and round).
// A sparse payload whose index lies outside its segment (a corrupt or foreign message)
// is refused naming it, before anything is written: dense_inout keeps its values.
void expect_out_of_range_refused(const at::Device& device) {
  const std::vector<std::int64_t> segs{40, 100};
  CompressorSpec spec = spec_of("top_k");
  spec = with_keep_ratio(spec, 0.1);  // 4 and 10 kept
  Compressor c(spec);
  Payload p;
  c.compress(random_input(140, 17).to(device), segs, p);
  at::Tensor bytes = p.bytes.cpu();
  reinterpret_cast<std::uint32_t*>(bytes.data_ptr())[4 + 3] = 100;  // segment 1's 4th index: its size
  p.bytes = bytes.to(device);
  at::Tensor dense = at::ones({140}, at::TensorOptions().device(device));
  try {
    c.decompress_add(p, 1.0, dense);
    ADD_FAILURE() << "an index outside its segment was accepted on " << device;
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "Compressor::decompress_add: index 100 out of range in segment 1 of 100 elements");
  }
  EXPECT_TRUE(at::equal(dense.cpu(), at::ones({140}))) << device;
}

TEST(Compressor, OutOfRangeIndexIsRefusedBeforeAnythingIsWritten) { expect_out_of_range_refused(at::kCPU); }

// A refused compress() is not a round: a seeded compressor's next payload is the one a
// fresh compressor makes first, so it stays in step with its peers'.
TEST(Compressor, RefusedCallDoesNotUseARound) {
  CompressorSpec spec = spec_of("random_k");
  spec.seed = 9;
  edit_settings<RandomKSettings>(spec).shared_seed = true;
  const at::Tensor x = random_input(1000, 3);
  Compressor refused(spec), fresh(spec);
  Payload a, b;
  EXPECT_THROW(refused.compress(x.view({10, 100}).t(), {}, a), std::invalid_argument);  // not contiguous
  const std::vector<std::int64_t> wrong_sizes{500, 400};
  EXPECT_THROW(refused.compress(x, wrong_sizes, a), std::invalid_argument);  // segments sum to 900
  refused.compress(x, {}, a);
  fresh.compress(x, {}, b);
  EXPECT_EQ(a.round, 0U);
  EXPECT_TRUE(at::equal(a.bytes, b.bytes));
}

TEST(CompressorCuda, OutOfRangeIndexIsRefusedBeforeAnythingIsWritten) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  expect_out_of_range_refused(at::kCUDA);
}

// The CUDA path takes fp32 only; its refusal of fp16 input, too, uses up no round.
TEST(CompressorCuda, RefusedCallDoesNotUseARound) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  CompressorSpec spec = spec_of("random_k");
  spec.seed = 9;
  const at::Tensor x = random_input(1000, 3);
  Compressor gpu(spec), cpu(spec);
  Payload pg, pc;
  EXPECT_THROW(gpu.compress(x.to(at::kHalf).to(at::kCUDA), {}, pg), std::invalid_argument);
  gpu.compress(x.to(at::kCUDA), {}, pg);
  cpu.compress(x, {}, pc);
  EXPECT_EQ(pg.round, 0U);
  EXPECT_TRUE(at::equal(pg.bytes.cpu(), pc.bytes));
}

TEST(CompressorCuda, EqualsCpuBitForBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  std::vector<std::int64_t> segs{1, 33, 0, 1025, 70000, 5};
  std::int64_t n = 0;
  for (auto s : segs) n += s;
  at::Tensor x = random_input(n, 61);
  std::vector<CompressorSpec> specs;
  for (const auto& info : compressor_kinds()) specs.push_back(spec_of(std::string(info.name)));
  specs.push_back(bucketed("qsgd", 512));  // the CPU's block encoder against the GPU's segments
  for (std::string kind : {"one_bit", "terngrad"})  // buckets smaller than a 1024-element chunk, and larger
    for (std::int64_t bucket : {32, 2048}) specs.push_back(bucketed(kind, bucket));
  for (CompressorSpec s : specs) {
    const std::string kind = s.kind;
    if (kind == "threshold") edit_settings<ThresholdSettings>(s).threshold = 2.0;  // its default, 0, keeps everything
    s.seed = 5;
    Compressor cpu_c(s), gpu_c(s);
    Payload pc, pg;
    cpu_c.compress(x, segs, pc);
    gpu_c.compress(x.to(at::kCUDA), segs, pg);
    EXPECT_TRUE(at::equal(pc.bytes, pg.bytes.cpu())) << kind;
    at::Tensor dc = at::empty({n}), dg = at::empty({n}, at::TensorOptions().device(at::kCUDA));
    cpu_c.decompress(pc, dc);
    gpu_c.decompress(pg, dg);
    EXPECT_TRUE(at::equal(dc, dg.cpu())) << kind;
  }
}

}  // namespace
}  // namespace dtsim::kernels
