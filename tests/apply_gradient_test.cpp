// The local optimizer update against the reference apply_gradient, worked by hand.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/apply_gradient.hpp"

namespace dtsim::algorithms {
namespace {

// One scalar parameter p0 = 1, gradients g1 = 0.5 then g2 = -0.25,
// lr = 0.1, wd = 0.01, momentum m = 0.9, dampening 0.
//   step 1: d = 0.5 + 0.01*1 = 0.51; buf = 0.51; p = 1 - 0.1*0.51 = 0.949
//   step 2: d = -0.25 + 0.01*0.949 = -0.24051; buf = 0.9*0.51 - 0.24051 = 0.21849
//           plain: p = 0.949 - 0.1*0.21849 = 0.927151
//           nesterov: d = -0.24051 + 0.9*0.21849 = -0.043869; p = 0.949 + 0.0043869
TEST(ApplyGradient, MomentumAndWeightDecayAsTheReference) {
  for (bool nesterov : {false, true}) {
    LocalOptimizer opt({.lr = 0.1, .momentum = 0.9, .dampening = 0.0, .weight_decay = 0.01, .nesterov = nesterov});
    std::vector<at::Tensor> p{at::full({1}, 1.0, at::kDouble)};
    std::vector<at::Tensor> g{at::full({1}, 0.5, at::kDouble)};
    opt.apply_gradient(p, g, 0.1);
    EXPECT_NEAR(p[0].item<double>(), nesterov ? 1.0 - 0.1 * (0.51 + 0.9 * 0.51) : 0.949, 1e-15);
    if (nesterov) continue;  // the second step below is worked for the plain variant
    g[0].fill_(-0.25);
    opt.apply_gradient(p, g, 0.1);
    EXPECT_NEAR(p[0].item<double>(), 0.927151, 1e-15);
  }
  LocalOptimizer nesterov({.lr = 0.1, .momentum = 0.9, .dampening = 0.0, .weight_decay = 0.01, .nesterov = true});
  std::vector<at::Tensor> p{at::full({1}, 1.0, at::kDouble)};
  std::vector<at::Tensor> g{at::full({1}, 0.5, at::kDouble)};
  nesterov.apply_gradient(p, g, 0.1);
  const double p1 = 1.0 - 0.1 * (0.51 + 0.9 * 0.51);
  g[0].fill_(-0.25);
  nesterov.apply_gradient(p, g, 0.1);
  const double d2 = -0.25 + 0.01 * p1, buf2 = 0.9 * 0.51 + d2;
  EXPECT_NEAR(p[0].item<double>(), p1 - 0.1 * (d2 + 0.9 * buf2), 1e-15);
}

// Without momentum the update is plain SGD; transform_gradient writes the
// processed direction back into the gradient and leaves the model untouched.
TEST(ApplyGradient, PlainSgdAndDeferredApplication) {
  LocalOptimizer sgd({.lr = 0.5});
  std::vector<at::Tensor> p{at::full({3}, 2.0, at::kDouble)};
  std::vector<at::Tensor> g{at::arange(3, at::kDouble)};
  sgd.apply_gradient(p, g, 0.5);
  EXPECT_TRUE(at::allclose(p[0], 2.0 - 0.5 * at::arange(3, at::kDouble)));

  LocalOptimizer deferred({.lr = 0.5, .momentum = 0.5, .dampening = 0.5, .weight_decay = 0.1});
  std::vector<at::Tensor> q{at::full({1}, 1.0, at::kDouble)};
  std::vector<at::Tensor> h{at::full({1}, 1.0, at::kDouble)};
  deferred.transform_gradient(q, h);
  EXPECT_DOUBLE_EQ(q[0].item<double>(), 1.0);
  EXPECT_NEAR(h[0].item<double>(), 1.1, 1e-15);  // first step: buf = d = 1.1
  h[0].fill_(1.0);
  deferred.transform_gradient(q, h);
  EXPECT_NEAR(h[0].item<double>(), 0.5 * 1.1 + 0.5 * 1.1, 1e-15);  // m*buf + (1-dampening)*d
}

}  // namespace
}  // namespace dtsim::algorithms
