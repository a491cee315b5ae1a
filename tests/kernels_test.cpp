// Aggregation kernels against ATen reference computations.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <vector>

#include "kernels/aggregation.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::kernels {
namespace {

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

}  // namespace
}  // namespace dtsim::kernels
