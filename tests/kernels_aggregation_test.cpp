// Aggregation kernels beyond weighted_sum: average, scatter-add of sparse messages,
// majority vote over packed signs, error feedback, and SINGA's fusion buckets. Each case
// compares with a LibTorch expression or a hand-worked closed form.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <vector>

#include "kernels/aggregation.hpp"
#include "kernels/codecs/qsgd.hpp"
#include "kernels/codecs/random_k.hpp"
#include "kernels/codecs/threshold.hpp"
#include "kernels/codecs/top_k.hpp"
#include "kernels/compressor.hpp"
#include "kernels/error_feedback.hpp"
#include "kernels/fusion_buckets.hpp"
#include "kernels/majority_vote.hpp"

namespace dtsim::kernels {
namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

// average equals the left-to-right ATen sum divided by k, bit for bit.
TEST(Average, MatchesATenSumThenDivide) {
  auto gen = at::detail::createCPUGenerator(1);
  for (std::int64_t n : {1, 33, 100000}) {
    for (int k : {1, 3, 8}) {
      std::vector<at::Tensor> xs;
      for (int j = 0; j < k; ++j) xs.push_back(at::randn({n}, gen, at::kFloat));
      at::Tensor want = xs[0].clone();
      for (int j = 1; j < k; ++j) want = want + xs[j];
      want = want / static_cast<float>(k);
      at::Tensor out = at::empty({n});
      average(out, xs);
      EXPECT_TRUE(at::equal(out, want)) << n << " " << k;
    }
  }
  at::Tensor out = at::empty({2});
  std::vector<at::Tensor> none;
  EXPECT_THROW(average(out, none), std::invalid_argument);
}

// scatter_add equals index_add_ (repeated indices included; integer-valued floats so that
// any order gives the same sum), and rejects an out-of-range index naming it.
TEST(ScatterAdd, MatchesIndexAddAndChecksBounds) {
  auto gen = at::detail::createCPUGenerator(2);
  at::Tensor dense = at::randint(-5, 5, {1000}, gen, at::kFloat);
  at::Tensor idx = at::randint(0, 1000, {5000}, gen, at::kLong);
  at::Tensor val = at::randint(-9, 9, {5000}, gen, at::kFloat);
  at::Tensor want = dense.clone().index_add_(0, idx, val);
  at::Tensor got = dense.clone();
  scatter_add(val, idx, got);
  EXPECT_TRUE(at::equal(got, want));
  at::Tensor got32 = dense.clone();
  scatter_add(val, idx.to(at::kInt), got32);
  EXPECT_TRUE(at::equal(got32, want));
  at::Tensor bad = at::tensor({3, 1000}, at::kLong);
  at::Tensor two = at::ones({2});
  try {
    scatter_add(two, bad, got);
    ADD_FAILURE() << "accepted index 1000";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("indices[1] = 1000"), std::string::npos) << e.what();
  }
}

// Many ranks' top-k payloads decompress_add'ed into one buffer equal the ATen sum of
// their decoded vectors: the sparse scatter-add of DGC's all-gather.
TEST(ScatterAdd, SumOfRanksTopKPayloads) {
  auto gen = at::detail::createCPUGenerator(3);
  Compressor c(CompressorSpec{.kind = "top_k", .settings = TopKSettings{.ratio = 0.1}});
  std::vector<std::int64_t> segs{300, 700};
  at::Tensor sum = at::zeros({1000}), want = at::zeros({1000});
  for (int r = 0; r < 5; ++r) {
    at::Tensor x = at::randn({1000}, gen, at::kFloat);
    Payload p;
    c.compress(x, segs, p);
    at::Tensor dense = at::empty({1000});
    c.decompress(p, dense);
    want = want + dense;
    c.decompress_add(p, 1.0, sum);
  }
  EXPECT_TRUE(at::equal(sum, want));
}

// majority_vote = sign(sum_r where(x_r < 0, -1, +1)), ties 0, for odd and even rank counts.
TEST(MajorityVote, MatchesSignOfSummedSigns) {
  auto gen = at::detail::createCPUGenerator(4);
  for (int ranks : {1, 2, 3, 4, 7}) {
    const std::int64_t n = 1000 + ranks;
    Compressor c(CompressorSpec{.kind = "sign"});
    Compressor cs(CompressorSpec{.kind = "scaled_sign"});
    std::vector<Payload> payloads(static_cast<std::size_t>(ranks));
    at::Tensor votes = at::zeros({n});
    for (int r = 0; r < ranks; ++r) {
      at::Tensor x = at::randn({n}, gen, at::kFloat);
      (r % 2 ? cs : c).compress(x, {}, payloads[static_cast<std::size_t>(r)]);
      votes += at::where(x.lt(0), -at::ones({n}), at::ones({n}));
    }
    at::Tensor out = at::empty({n});
    majority_vote(payloads, out);
    EXPECT_TRUE(at::equal(out, at::sign(votes))) << ranks;
    if (ranks % 2 == 0) {
      EXPECT_TRUE(out.eq(0).any().item<bool>());
    }
  }
}

// The bit-sliced vote (16 words per block, counters of bit_width(R) bits) at rank counts
// that fill the counter exactly (8, 15, 16, 31, 32) and beyond (33, 64), on inputs that
// leave a partial 16-word block and a partial last word; inputs with few distinct
// values make ties common for even R.
TEST(MajorityVote, BitSlicedCountersAtManyRanks) {
  auto gen = at::detail::createCPUGenerator(8);
  const std::int64_t n = 16 * 32 * 5 + 32 * 3 + 7;
  for (int ranks : {8, 15, 16, 31, 32, 33, 64}) {
    Compressor c(CompressorSpec{.kind = "sign"});
    std::vector<Payload> payloads(static_cast<std::size_t>(ranks));
    at::Tensor votes = at::zeros({n});
    for (int r = 0; r < ranks; ++r) {
      at::Tensor x = at::randint(-1, 1, {n}, gen, at::kFloat) + 0.5f;  // +-0.5
      c.compress(x, {}, payloads[static_cast<std::size_t>(r)]);
      votes += at::where(x.lt(0), -at::ones({n}), at::ones({n}));
    }
    at::Tensor out = at::empty({n});
    majority_vote(payloads, out);
    EXPECT_TRUE(at::equal(out, at::sign(votes))) << ranks;
  }
}

// The fused error feedback does not depend on the thread count (300K elements: several
// parallel parts) and equals the unfused steps under both.
TEST(ErrorFeedback, FusedIsThreadCountIndependent) {
  auto gen = at::detail::createCPUGenerator(9);
  std::vector<std::int64_t> segs{200000, 3, 100000};
  at::Tensor x = at::randn({300003}, gen, at::kFloat), m0 = at::randn({300003}, gen, at::kFloat);
  const int saved = at::get_num_threads();
  for (std::string_view kind : {"identity", "sign", "scaled_sign", "qsgd", "fp16", "bf16"}) {
    CompressorSpec s{.kind = std::string(kind), .seed = 4};
    if (kind == "qsgd") edit_settings<QsgdSettings>(s).tau_rescale = true;
    std::vector<at::Tensor> memories, bytes;
    for (int threads : {1, 3}) {
      at::set_num_threads(threads);
      Compressor fused(s), manual(s);
      at::Tensor m = m0.clone(), ref = m0.clone();
      Payload q, q_ref;
      error_feedback_step(fused, m, x, segs, q);
      ref.add_(x);
      manual.compress(ref, segs, q_ref);
      manual.decompress_add(q_ref, -1.0, ref);
      EXPECT_TRUE(at::equal(q.bytes, q_ref.bytes)) << kind << " threads " << threads;
      EXPECT_TRUE(at::equal(m, ref)) << kind << " threads " << threads;
      memories.push_back(m);
      bytes.push_back(q.bytes.clone());
    }
    EXPECT_TRUE(at::equal(memories[0], memories[1])) << kind;
    EXPECT_TRUE(at::equal(bytes[0], bytes[1])) << kind;
  }
  at::set_num_threads(saved);
}

// error_feedback_step equals the three steps done one by one, for every kind, and
// carries what was not sent: memory_new + decompress(q) == memory_old + x.
TEST(ErrorFeedback, EqualsUnfusedStepsForEveryKind) {
  auto gen = at::detail::createCPUGenerator(5);
  std::vector<std::int64_t> segs{10, 1000, 3001};
  for (std::string_view kind :
       {"identity", "top_k", "random_k", "threshold", "sign", "scaled_sign", "qsgd", "fp16", "bf16"}) {
    CompressorSpec s{.kind = std::string(kind), .seed = 3};
    if (kind == "top_k") s.settings = TopKSettings{.ratio = 0.05};
    if (kind == "random_k") s.settings = RandomKSettings{.ratio = 0.05};
    if (kind == "threshold") s.settings = ThresholdSettings{.threshold = 1.0};
    Compressor fused(s), manual(s);
    at::Tensor memory = at::randn({4011}, gen, at::kFloat), ref_memory = memory.clone();
    for (int step = 0; step < 3; ++step) {
      at::Tensor x = at::randn({4011}, gen, at::kFloat);
      Payload q, q_ref;
      error_feedback_step(fused, memory, x, segs, q);
      ref_memory = ref_memory + x;
      at::Tensor before = ref_memory.clone();
      manual.compress(ref_memory, segs, q_ref);
      at::Tensor decoded = at::empty({4011});
      manual.decompress(q_ref, decoded);
      ref_memory = ref_memory - decoded;
      EXPECT_TRUE(at::equal(q.bytes, q_ref.bytes)) << kind;
      EXPECT_TRUE(at::equal(memory, ref_memory)) << kind;
      if (kind == "top_k") {  // the sent coordinates are cleared exactly
        EXPECT_EQ(memory.eq(0).sum().item<std::int64_t>(), fused.k_for(10) + fused.k_for(1000) + fused.k_for(3001));
        EXPECT_TRUE(at::equal(memory + decoded, before));
      }
    }
  }
}

// SINGA's rule, hand-worked (threshold 10):
//   sizes 4, 5, 3 -> staged 12 > 10 closes {0,1,2}; 20 is large: {3} at once;
//   2 staged; 11 large: {5}, and the pending {4} is not flushed; 9 -> staged 11 closes {4,6};
//   10 is not larger than 10: staged, left over last.
TEST(FusionBuckets, SingaRuleHandWorked) {
  std::vector<std::int64_t> sizes{4, 5, 3, 20, 2, 11, 9, 10};
  EXPECT_EQ(fusion_buckets(sizes, 10), (Buckets{{0, 1, 2}, {3}, {5}, {4, 6}, {7}}));
  // exactly reaching the threshold does not close (strictly greater)
  std::vector<std::int64_t> exact{5, 5, 1};
  EXPECT_EQ(fusion_buckets(exact, 10), (Buckets{{0, 1, 2}}));
  std::vector<std::int64_t> none;
  EXPECT_TRUE(fusion_buckets(none, 10).empty());
  std::vector<std::int64_t> all_large{11, 12};
  EXPECT_EQ(fusion_buckets(all_large, 10), (Buckets{{0}, {1}}));
  // threshold 0: every non-empty tensor is its own bucket, empty ones are staged
  std::vector<std::int64_t> zeros{0, 3, 0};
  EXPECT_EQ(fusion_buckets(zeros, 0), (Buckets{{1}, {0, 2}}));
  std::vector<std::int64_t> negative{1, -1};
  EXPECT_THROW(fusion_buckets(negative, 10), std::invalid_argument);
  // every index appears exactly once
  auto gen = at::detail::createCPUGenerator(6);
  at::Tensor rnd = at::randint(0, 100, {200}, gen, at::kLong);
  std::vector<std::int64_t> many(rnd.data_ptr<std::int64_t>(), rnd.data_ptr<std::int64_t>() + 200);
  std::vector<int> seen(200, 0);
  for (const auto& b : fusion_buckets(many, 50))
    for (auto i : b) ++seen[i];
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 200);
}

// CUDA average, scatter-add and majority vote equal the CPU kernels (GPU machine only).
// An index outside dense is refused naming the first one; the GPU checks before adding
// anything, so dense keeps its values there.
TEST(AggregationCuda, OutOfRangeIndexIsRefusedBeforeAnythingIsAdded) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (auto type : {at::kLong, at::kInt}) {
    at::Tensor idx = at::arange(10, at::TensorOptions().dtype(type));
    idx[7] = 50;
    idx[8] = -1;
    at::Tensor dense = at::zeros({50}, at::TensorOptions().device(at::kCUDA));
    try {
      scatter_add(at::ones({10}, at::TensorOptions().device(at::kCUDA)), idx.to(at::kCUDA), dense);
      ADD_FAILURE() << "an index outside dense was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(), "scatter_add: indices[7] = 50 is outside [0, 50)");
    }
    EXPECT_EQ(dense.abs().sum().item<float>(), 0.0f);
  }
}

TEST(AggregationCuda, EqualsCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto gen = at::detail::createCPUGenerator(7);
  std::vector<at::Tensor> xs, xg;
  for (int j = 0; j < 3; ++j) {
    xs.push_back(at::randn({100001}, gen, at::kFloat));
    xg.push_back(xs.back().to(at::kCUDA));
  }
  at::Tensor oc = at::empty({100001}), og = at::empty({100001}, at::TensorOptions().device(at::kCUDA));
  average(oc, xs);
  average(og, xg);
  EXPECT_TRUE(at::equal(oc, og.cpu()));
  at::Tensor idx = at::randperm(100001, gen, at::kLong).narrow(0, 0, 5000);
  at::Tensor val = at::randn({5000}, gen, at::kFloat);
  at::Tensor dc = xs[0].clone(), dg = xg[0].clone();
  scatter_add(val, idx, dc);
  scatter_add(val.to(at::kCUDA), idx.to(at::kCUDA), dg);
  EXPECT_TRUE(at::equal(dc, dg.cpu()));
  Compressor c(CompressorSpec{.kind = "sign"});
  std::vector<Payload> pc(3), pg(3);
  for (int r = 0; r < 3; ++r) {
    c.compress(xs[r], {}, pc[r]);
    c.compress(xg[r], {}, pg[r]);
  }
  majority_vote(pc, oc);
  majority_vote(pg, og);
  EXPECT_TRUE(at::equal(oc, og.cpu()));
}

}  // namespace
}  // namespace dtsim::kernels
