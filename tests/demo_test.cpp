// DeMo (algorithms/demo.hpp) on emulated ranks with fixed gradients: keeping every DCT
// coefficient averages the ranks' momenta and empties them; n_bits in closed form; the
// trajectory of a straightforward reference written here with plain ATen (the DCT as
// matrix products in double); the scenario errors.
#include <gtest/gtest.h>

#include <cmath>

#include "algorithms/demo.hpp"
#include "fixed_gradients.hpp"
#include "runner/scenario.hpp"

namespace dtsim {
namespace {

using testing::Shapes;

algorithms::AlgorithmSpec demo_spec(double beta, std::int64_t chunk, std::int64_t k, double weight_decay = 0.0) {
  algorithms::AlgorithmSpec spec;
  spec.name = "demo";
  spec.optimizer.weight_decay = weight_decay;
  spec.settings = algorithms::DemoSettings{.compression_decay = beta, .compression_topk = k, .compression_chunk = chunk};
  return spec;
}

testing::FixedRun run_demo(const algorithms::AlgorithmSpec& spec, int ranks, const Shapes& shapes, std::int64_t steps,
                           double lr, const testing::StepHook& hook = {}) {
  return testing::run_fixed_gradients([&](int) { return std::make_unique<algorithms::Demo>(spec); }, ranks, shapes,
                                      steps, lr, hook);
}

const algorithms::Demo& demo_of(const testing::FixedRun& run, int r) {
  return dynamic_cast<const algorithms::Demo&>(*run.algorithms[static_cast<std::size_t>(r)]);
}

// Shapes that pad (20 x 13 in tiles of 8), a vector, a 3-D tensor (4 x 15 as a matrix) and
// a single element.
const Shapes kShapes{{20, 13}, {30}, {4, 3, 5}, {1}};

// With k = chunk^2 every coefficient of every chunk is sent: delta - IDCT(DCT(delta)) is
// the fp32 round trip's error, and Q = IDCT(mean_s DCT(delta_s)) is the ranks' mean delta.
// Tolerance: each coefficient is a dot product of at most 8 terms per dimension, four
// transforms deep, on values of |lr g| < 0.5: a few fp32 ulps of 0.5, so 1e-6.
TEST(Demo, KeepingEveryCoefficientAveragesTheDeltasAndEmptiesThem) {
  const int ranks = 3;
  const double lr = 0.1;
  const auto spec = demo_spec(0.9, 8, 64);
  const auto run = run_demo(spec, ranks, kShapes, 1, lr);
  for (std::size_t i = 0; i < kShapes.size(); ++i) {
    auto mean = at::zeros(kShapes[i]);
    for (int r = 0; r < ranks; ++r) mean.add_(testing::fixed_gradient(kShapes, r, 1, i) * lr);
    mean.div_(ranks);
    for (int r = 0; r < ranks; ++r) {
      const auto& demo = demo_of(run, r);
      EXPECT_LE((demo.average(i) - mean).abs().max().item<double>(), 1e-6) << "tensor " << i << " rank " << r;
      EXPECT_LE(demo.delta(i).abs().max().item<double>(), 1e-6) << "tensor " << i << " rank " << r;
      // The sign step of the mean (no element of Q is near 0 at these draws).
      const auto want = testing::fixed_parameters(kShapes)[i] - lr * at::sign(mean);
      EXPECT_TRUE(at::allclose(run.params[0][r][i], want, 0.0, 1e-6)) << "tensor " << i << " rank " << r;
    }
  }
}

// n_bits = sum over tensors of chunks k (32 + b), b = max(1, ceil(log2 E)), k = min(32, E):
//   130 x 70 in 64 x 64 tiles: 3 x 2 chunks of E = 4096 (b = 12): 6 32 44 = 8448
//   100: 2 chunks of 64 (b = 6): 2 32 38 = 2432
//   10: one chunk of 10 (b = 4), all 10 kept: 10 36 = 360
//   5 x 3 x 4 = 5 x 12: one tile of 60 (b = 6): 32 38 = 1216
// 12456 bits per rank per step; the message is 32-bit words: the values, then each
// tensor's index words (ceil(pairs b / 32)).
TEST(Demo, BitsPerStepInClosedForm) {
  const Shapes shapes{{130, 70}, {100}, {10}, {5, 3, 4}};
  const auto run = run_demo(demo_spec(0.999, 64, 32), 2, shapes, 2, 0.01);
  const std::int64_t words = (6 * 32 + 6 * 32 * 12 / 32) + (2 * 32 + 2 * 32 * 6 / 32) + (10 + (10 * 4 + 31) / 32) +
                             (32 + 32 * 6 / 32);
  for (std::size_t t = 0; t < 2; ++t)
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(run.n_bits[t][r], 8448u + 2432u + 360u + 1216u);
      EXPECT_EQ(demo_of(run, r).message().numel(), words);
    }
  // Two ranks: each sends its message once (the all-gather's ring has one hop).
  EXPECT_EQ(run.wire_bytes[0][0], 4u * static_cast<std::uint64_t>(words));
}

// The reference: DeMo's update on every rank, with the DCT of each chunk as D_r X D_c^T in
// double (D the orthonormal DCT-II matrix), top-k by magnitude per chunk, decode D_r^T C D_c.
struct Reference {
  std::int64_t chunk, k;

  static at::Tensor dct(std::int64_t n) {
    auto d = at::empty({n, n}, at::kDouble);
    auto acc = d.accessor<double, 2>();
    const double pi = std::acos(-1.0), nn = static_cast<double>(n);
    for (std::int64_t a = 0; a < n; ++a)
      for (std::int64_t b = 0; b < n; ++b)
        acc[a][b] = (a == 0 ? std::sqrt(1.0 / nn) : std::sqrt(2.0 / nn)) *
                    std::cos(pi * (static_cast<double>(b) + 0.5) * static_cast<double>(a) / nn);
    return d;
  }
  struct Tiles {
    std::int64_t rows, cols, tr, tc, cr, cc;
  };
  Tiles tiles(at::IntArrayRef shape) const {
    Tiles t{};
    t.rows = shape.size() >= 2 ? shape[0] : 1;
    t.cols = 1;
    for (std::size_t d = shape.size() >= 2 ? 1 : 0; d < shape.size(); ++d) t.cols *= shape[d];
    t.tr = shape.size() >= 2 ? std::min(chunk, t.rows) : 1;
    t.tc = std::min(chunk, t.cols);
    t.cr = (t.rows + t.tr - 1) / t.tr;
    t.cc = (t.cols + t.tc - 1) / t.tc;
    return t;
  }
  // [cr, cc, tr, tc] coefficients of x (double), zero-padded.
  at::Tensor encode(const at::Tensor& x) const {
    const auto t = tiles(x.sizes());
    auto m = at::zeros({t.cr * t.tr, t.cc * t.tc}, at::kDouble);
    m.narrow(0, 0, t.rows).narrow(1, 0, t.cols).copy_(x.reshape({t.rows, t.cols}));
    const auto blocks = m.view({t.cr, t.tr, t.cc, t.tc}).permute({0, 2, 1, 3});
    return at::matmul(at::matmul(dct(t.tr), blocks), dct(t.tc).t());
  }
  at::Tensor decode(const at::Tensor& c, at::IntArrayRef shape) const {
    const auto t = tiles(shape);
    const auto blocks = at::matmul(at::matmul(dct(t.tr).t(), c), dct(t.tc));
    const auto m = blocks.permute({0, 2, 1, 3}).reshape({t.cr * t.tr, t.cc * t.tc});
    return m.narrow(0, 0, t.rows).narrow(1, 0, t.cols).reshape(shape).contiguous();
  }
  // The k largest magnitudes of each chunk kept, the rest 0.
  at::Tensor top_k(const at::Tensor& c) const {
    const auto flat = c.reshape({c.size(0), c.size(1), -1});
    const auto kk = std::min<std::int64_t>(k, flat.size(2));
    const auto idx = std::get<1>(at::topk(flat.abs(), kk, 2));
    auto kept = at::zeros_like(flat);
    kept.scatter_(2, idx, flat.gather(2, idx));
    return kept.view(c.sizes());
  }
};

// 3 steps of DeMo on 2 and 4 ranks with weight decay: every rank's parameters and delta
// follow the reference. The implementation rounds the transforms in fp32: 1e-5 holds for
// parameters of order 1 unless an element of Q lies within that of 0 (no such element at
// these draws), and delta's values are of order lr |g|.
TEST(Demo, FollowsAPlainReferenceForThreeSteps) {
  const Shapes shapes{{20, 13}, {30}, {4, 3, 5}};
  for (int ranks : {2, 4}) {
    const double lr = 0.05, beta = 0.9, wd = 0.1;
    const Reference ref{8, 5};
    const auto run = run_demo(demo_spec(beta, 8, 5, wd), ranks, shapes, 3, lr);
    std::vector<at::Tensor> theta;
    for (const auto& p : testing::fixed_parameters(shapes)) theta.push_back(p.to(at::kDouble));
    std::vector<std::vector<at::Tensor>> delta(static_cast<std::size_t>(ranks));
    for (auto& d : delta)
      for (const auto& s : shapes) d.push_back(at::zeros(s, at::kDouble));
    for (std::int64_t t = 1; t <= 3; ++t) {
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        at::Tensor sum;
        for (int r = 0; r < ranks; ++r) {
          auto& d = delta[r][i];
          d = beta * d + lr * testing::fixed_gradient(shapes, r, t, i).to(at::kDouble);
          const auto kept = ref.top_k(ref.encode(d));
          d = d - ref.decode(kept, shapes[i]);
          sum = sum.defined() ? sum + kept : kept;
        }
        const auto q = ref.decode(sum / ranks, shapes[i]);
        theta[i] = theta[i] * (1.0 - lr * wd) - lr * at::sign(q);
        for (int r = 0; r < ranks; ++r) {
          SCOPED_TRACE(::testing::Message() << ranks << " ranks, step " << t << ", tensor " << i << ", rank " << r);
          EXPECT_LE((run.params[t - 1][r][i].to(at::kDouble) - theta[i]).abs().max().item<double>(), 1e-5);
          if (t == 3) {
            EXPECT_LE((demo_of(run, r).delta(i).to(at::kDouble) - delta[r][i]).abs().max().item<double>(), 1e-6);
          }
        }
      }
    }
  }
}

// The memories are the deltas: one fp32 copy of the model.
TEST(Demo, StateBytesAreTheDeltas) {
  const auto run = run_demo(demo_spec(0.999, 8, 4), 2, kShapes, 1, 0.01);
  EXPECT_EQ(demo_of(run, 0).state_bytes(), 4u * (20 * 13 + 30 + 60 + 1));
}

nlohmann::json scenario_with(const nlohmann::json& algorithm) {
  return {{"name", "demo"},
          {"ranks", 2},
          {"steps", 1},
          {"workload", {{"type", "logistic_regression"}, {"samples", 64}, {"features", 4}}},
          {"algorithm", algorithm},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 1}, {"bandwidth_GBps", 10}}}};
}

std::string error_of(const nlohmann::json& algorithm) {
  try {
    runner::parse_scenario(scenario_with(algorithm));
  } catch (const config::ScenarioError& e) {
    return e.what();
  }
  return "no error";
}

// Each bad value is one line naming its JSON path; SGD's momentum fields are not DeMo's.
TEST(Demo, ScenarioErrorsNameThePath) {
  const nlohmann::json base = {{"name", "demo"}, {"lr", 0.01}};
  auto with = [&](const char* key, const nlohmann::json& value) {
    auto a = base;
    a[key] = value;
    return a;
  };
  EXPECT_EQ(error_of(with("compression_decay", 1.0)), "/algorithm/compression_decay: expected a number in [0, 1), got 1");
  EXPECT_EQ(error_of(with("compression_decay", -0.5)),
            "/algorithm/compression_decay: expected a number in [0, 1], got -0.5");
  EXPECT_EQ(error_of(with("compression_topk", 4097)),
            "/algorithm/compression_topk: expected at most the 4096 coefficients of a 64 x 64 chunk, got 4097");
  EXPECT_EQ(error_of(with("compression_chunk", 65)).rfind("/algorithm/compression_chunk: expected an integer", 0), 0u);
  EXPECT_EQ(error_of(with("momentum", 0.9)).rfind("/algorithm/momentum: ", 0), 0u);
  EXPECT_EQ(error_of(with("nesterov", true)).rfind("/algorithm/nesterov: ", 0), 0u);
  // The defaults echo and parse again.
  const auto s = runner::parse_scenario(scenario_with(base));
  const auto echoed = s.to_json();
  EXPECT_EQ(echoed["algorithm"]["compression_decay"], 0.999);
  EXPECT_EQ(echoed["algorithm"]["compression_topk"], 32);
  EXPECT_EQ(echoed["algorithm"]["compression_chunk"], 64);
  EXPECT_FALSE(echoed["algorithm"].contains("momentum"));
  EXPECT_EQ(runner::parse_scenario(echoed).to_json(), echoed);
}

}  // namespace
}  // namespace dtsim
