// Aggregation kernels against ATen reference computations.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <atomic>
#include <vector>

#include "kernels/aggregation.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::kernels {
namespace {

// dtsim's own code runs at::parallel_for on several threads: it is compiled with OpenMP
// where LibTorch uses it (cmake/DtsimDeps.cmake). Compiled without, at::parallel_for calls
// the body once on the calling thread, every "parallel" kernel runs on one thread whatever
// at::set_num_threads says, and no result shows it.
TEST(Build, ParallelForRunsOnSeveralThreads) {
  const int saved = at::get_num_threads();
  at::set_num_threads(2);
  std::atomic<int> threads_seen{0};
  at::parallel_for(0, 2, 1, [&](std::int64_t, std::int64_t) { threads_seen |= 1 << at::get_thread_num(); });
  at::set_num_threads(saved);
  EXPECT_EQ(threads_seen.load(), 3) << "at::parallel_for ran on one thread: is dtsim compiled with OpenMP?";
}

// weighted_sum equals the left-to-right ATen expression bit for bit (same fp32 order),
// across sizes that do and do not split across threads.
TEST(WeightedSum, MatchesATenReference) {
  auto gen = at::detail::createCPUGenerator(7);
  for (std::int64_t n : {1, 17, 100000}) {
    for (int k : {1, 2, 3, 9}) {
      std::vector<at::Tensor> xs;
      std::vector<double> w;
      for (int j = 0; j < k; ++j) {
        xs.push_back(at::randn({n}, gen, at::kFloat));
        w.push_back(1.0 / (j + 2));
      }
      at::Tensor want = xs[0] * static_cast<float>(w[0]);
      for (int j = 1; j < k; ++j) want = want + xs[j] * static_cast<float>(w[j]);
      at::Tensor out = at::empty({n});
      weighted_sum(out, xs, w);
      EXPECT_TRUE(at::equal(out, want)) << "n=" << n << " k=" << k;
    }
  }
}

TEST(WeightedSum, RejectsBadInputs) {
  at::Tensor out = at::empty({4});
  std::vector<at::Tensor> xs{at::ones({5})};
  std::vector<double> w{1.0};
  EXPECT_THROW(weighted_sum(out, xs, w), std::invalid_argument);
  std::vector<at::Tensor> aliasing{out};
  EXPECT_THROW(weighted_sum(out, aliasing, w), std::invalid_argument);
  std::vector<double> two{1.0, 2.0};
  std::vector<at::Tensor> one{at::ones({4})};
  EXPECT_THROW(weighted_sum(out, one, two), std::invalid_argument);
}

// Flatten, modify the buffer, unpack: every tensor gets its slice back in its shape.
TEST(TensorBuffer, RoundTripsShapes) {
  std::vector<at::Tensor> ts{at::arange(6, at::kFloat).view({2, 3}), at::full({1}, 7.0f), at::arange(4, at::kFloat)};
  TensorBuffer tb(ts);
  EXPECT_EQ(tb.buffer().numel(), 11);
  EXPECT_TRUE(at::equal(tb.view(0), ts[0]));
  tb.buffer().mul_(2);
  tb.unpack(ts);
  EXPECT_TRUE(at::equal(ts[0], at::arange(6, at::kFloat).view({2, 3}) * 2));
  EXPECT_EQ(ts[1].item<float>(), 14.0f);
  ts[2].fill_(1.0f);
  tb.pack(ts);
  EXPECT_TRUE(at::equal(tb.view(2), at::ones({4})));
}

// A model's worth of tensors (empty ones, a scalar, sizes up to 150 K elements, 1.3 MB in
// all, so the 256 KB chunks straddle tensors) packs to exactly at::cat of the flattened
// tensors and unpacks back, for element sizes 1, 2, 4 and 8 and at 1, 2 and 5 threads.
TEST(TensorBuffer, FusedCopiesEqualCatAtEveryThreadCount) {
  auto gen = at::detail::createCPUGenerator(11);
  const int saved = at::get_num_threads();
  for (auto type : {at::kFloat, at::kHalf, at::kByte, at::kLong}) {
    std::vector<at::Tensor> ts{at::randn({0}, gen).to(type), at::randn({}, gen).to(type)};
    for (int i = 0; i < 120; ++i) {
      const std::int64_t n = (i % 7 == 0) ? 0 : (i * 7919) % (i % 11 == 0 ? 150000 : 900) + 1;
      ts.push_back((at::randn({n}, gen) * 100).to(type).view(i % 3 == 0 && n % 2 == 0 ? at::IntArrayRef{2, n / 2}
                                                                                          : at::IntArrayRef{n}));
    }
    std::vector<at::Tensor> flat;
    for (const auto& t : ts) flat.push_back(t.reshape({-1}));
    const at::Tensor want = at::cat(flat);
    for (int threads : {1, 2, 5}) {
      at::set_num_threads(threads);
      TensorBuffer tb(ts);
      EXPECT_TRUE(at::equal(tb.buffer(), want)) << type << " at " << threads << " threads";
      tb.buffer().copy_((at::randn({tb.buffer().numel()}, gen) * 100).to(type));
      std::vector<at::Tensor> back;
      for (const auto& t : ts) back.push_back(at::empty_like(t));
      tb.unpack(back);
      for (std::size_t i = 0; i < ts.size(); ++i) {
        ASSERT_EQ(back[i].sizes(), ts[i].sizes());
        EXPECT_TRUE(at::equal(back[i], tb.view(i))) << type << " tensor " << i << " at " << threads << " threads";
      }
    }
  }
  at::set_num_threads(saved);
}

// Tensors the fused copy cannot take (another dtype, strided) are copied one by one with
// copy_'s conversions, next to the ones it takes; a tensor may have another shape with its
// slot's element count, on either path; tensors that are the buffer's own views stay.
TEST(TensorBuffer, MixesFusedAndConvertedTensorsAndLeavesItsOwnViews) {
  std::vector<at::Tensor> ts{at::arange(6, at::kFloat).view({2, 3}), at::arange(4, at::kFloat),
                             at::arange(5, at::kFloat)};
  TensorBuffer tb(ts);
  std::vector<at::Tensor> mixed{at::arange(6, at::kDouble).view({3, 2}).t(), at::full({2, 2}, 0.5, at::kDouble),
                                at::full({5}, 7.0f)};
  tb.pack(mixed);
  EXPECT_TRUE(at::equal(tb.view(0), mixed[0].to(at::kFloat)));
  EXPECT_TRUE(at::equal(tb.view(1), at::full({4}, 0.5f)));
  EXPECT_TRUE(at::equal(tb.view(2), at::full({5}, 7.0f)));
  tb.buffer().neg_();
  tb.unpack(mixed);
  EXPECT_TRUE(at::equal(mixed[0], -at::arange(6, at::kDouble).view({3, 2}).t()));
  EXPECT_TRUE(at::equal(mixed[1], at::full({2, 2}, -0.5, at::kDouble)));
  EXPECT_TRUE(at::equal(mixed[2], at::full({5}, -7.0f)));
  std::vector<at::Tensor> own{tb.view(0), tb.view(1), tb.view(2)};
  const at::Tensor before = tb.buffer().clone();
  tb.pack(own);
  tb.unpack(own);
  EXPECT_TRUE(at::equal(tb.buffer(), before));
}

// A wrong number of tensors, or a tensor of the wrong element count, is refused by name
// (copy_ would have broadcast a one-element tensor over its slice).
TEST(TensorBuffer, RefusesTensorsThatDoNotFitByName) {
  std::vector<at::Tensor> ts{at::zeros({5}), at::zeros({2, 2})};
  TensorBuffer tb(ts);
  const auto message = [&](std::vector<at::Tensor> xs, bool pack) {
    try {
      if (pack)
        tb.pack(xs);
      else
        tb.unpack(xs);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message({at::zeros({5})}, true), "TensorBuffer::pack: 1 tensors, the buffer holds 2");
  EXPECT_EQ(message({at::ones({1}), at::zeros({4})}, true), "TensorBuffer::pack: tensor 0 has 1 elements, the buffer holds 5");
  EXPECT_EQ(message({at::zeros({5}), at::Tensor()}, false),
            "TensorBuffer::unpack: tensor 1 has 0 elements, the buffer holds 4");
  EXPECT_EQ(message({at::zeros({5}), at::zeros({4})}, true), "accepted");
}

// The CUDA fused copies equal the CPU ones (GPU machine only): odd sizes and offsets that
// take every word width (16, 8, 4, 2 and 1 bytes), more than one 64-tensor launch.
TEST(TensorBufferCuda, EqualsCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto gen = at::detail::createCPUGenerator(12);
  for (auto type : {at::kFloat, at::kHalf, at::kByte, at::kLong}) {
    std::vector<at::Tensor> cpu, gpu;
    for (int i = 0; i < 150; ++i) {
      const std::int64_t n = (i % 9 == 0) ? 0 : (i * 7919) % (i % 13 == 0 ? 300000 : 1000) + 1;
      cpu.push_back((at::randn({n}, gen) * 100).to(type));
      gpu.push_back(cpu.back().to(at::kCUDA));
    }
    TensorBuffer tc(cpu), tg(gpu);
    EXPECT_TRUE(at::equal(tc.buffer(), tg.buffer().cpu())) << type;
    tg.buffer().neg_();
    tg.unpack(gpu);
    for (std::size_t i = 0; i < gpu.size(); ++i) EXPECT_TRUE(at::equal(gpu[i].cpu(), cpu[i].neg())) << type << " " << i;
  }
}

}  // namespace
}  // namespace dtsim::kernels
