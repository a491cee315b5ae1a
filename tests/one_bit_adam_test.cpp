// 1-bit Adam (algorithms/one_bit_adam.hpp) on emulated ranks with fixed gradients: the
// warm-up is the optimizers registry's adam / adamw (torch.optim.Adam / AdamW, bit for bit)
// on the rank-order average of the gradients; after freeze_step v stays as it was, the
// worker error is exactly x - C(x), and the momentum every rank ends with is, bit for bit,
// a reference two-phase compressed all-reduce written here with plain ATen (DeepSpeed's
// operations: signs times scale / R summed over ranks, server error, scale times signs);
// n_bits in closed form; the scenario errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "algorithms/one_bit_adam.hpp"
#include "algorithms/optimizers/adam.hpp"
#include "algorithms/optimizers/adam_moments.hpp"
#include "algorithms/optimizers/optimizer.hpp"
#include "fixed_gradients.hpp"
#include "runner/scenario.hpp"

namespace dtsim {
namespace {

using testing::Shapes;

algorithms::AlgorithmSpec one_bit_spec(std::int64_t freeze_step, double weight_decay = 0.0) {
  algorithms::AlgorithmSpec spec;
  spec.name = "one_bit_adam";
  spec.optimizer.weight_decay = weight_decay;
  spec.settings = algorithms::OneBitAdamSettings{.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .freeze_step = freeze_step};
  return spec;
}

testing::FixedRun run_one_bit(const algorithms::AlgorithmSpec& spec, int ranks, const Shapes& shapes, std::int64_t steps,
                              double lr, const testing::StepHook& hook = {}) {
  return testing::run_fixed_gradients([&](int) { return std::make_unique<algorithms::OneBitAdam>(spec); }, ranks,
                                      shapes, steps, lr, hook);
}

const algorithms::OneBitAdam& adam_of(const testing::FixedRun& run, int r) {
  return dynamic_cast<const algorithms::OneBitAdam&>(*run.algorithms[static_cast<std::size_t>(r)]);
}

// 70 x 13 (910 elements), 33 and 5: every one padded, for any R.
const Shapes kShapes{{70, 13}, {33}, {5}};

// The rank-order average the emulated all-reduce makes.
at::Tensor average_gradient(const Shapes& shapes, int ranks, std::int64_t t, std::size_t i) {
  auto sum = testing::fixed_gradient(shapes, 0, t, i).clone();
  for (int r = 1; r < ranks; ++r) sum.add_(testing::fixed_gradient(shapes, r, t, i));
  return sum.div_(ranks);
}

// During the warm-up every rank takes torch.optim.Adam's step (AdamW's with weight decay)
// on the averaged gradient: the registry's optimizer on the same gradients gives the same
// bits, and n_bits is the fp32 all-reduce's 32 d.
TEST(OneBitAdam, WarmUpIsTorchAdamOnTheAveragedGradients) {
  for (const double wd : {0.0, 0.05}) {
    const int ranks = 3;
    const double lr = 0.01;
    const auto run = run_one_bit(one_bit_spec(100, wd), ranks, kShapes, 4, lr);
    algorithms::optimizers::OptimizerConfig config;
    config.name = wd == 0.0 ? "adam" : "adamw";
    config.weight_decay = wd;
    config.settings = algorithms::optimizers::AdamSettings{.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
    auto adam = algorithms::optimizers::make_optimizer(config);
    auto params = testing::fixed_parameters(kShapes);
    for (std::int64_t t = 1; t <= 4; ++t) {
      std::vector<at::Tensor> grads;
      for (std::size_t i = 0; i < kShapes.size(); ++i) grads.push_back(average_gradient(kShapes, ranks, t, i));
      adam->step(params, grads, lr);
      for (int r = 0; r < ranks; ++r) {
        for (std::size_t i = 0; i < kShapes.size(); ++i)
          EXPECT_TRUE(at::equal(run.params[t - 1][r][i], params[i])) << config.name << " step " << t << " tensor " << i;
        EXPECT_EQ(run.n_bits[t - 1][r], 32u * (910 + 33 + 5));
      }
    }
  }
}

// What the hooks saw on one rank around one step.
struct Seen {
  std::vector<at::Tensor> m, e_w, e_s, v, params;
};

at::Tensor signs_of(const at::Tensor& x) { return at::where(x >= 0, at::ones_like(x), -at::ones_like(x)); }
at::Tensor scale_of(const at::Tensor& x) { return x.norm().div(std::sqrt(static_cast<double>(x.numel()))); }

// Steps 1-2 warm up, steps 3-6 compress, on 3 and 4 ranks (the padding differs: N = 96 k,
// 128 k). For every compressed step and tensor, from the state before the step:
//   x_r   = [b1 m_r + (1 - b1) g_r, 0] + e_w,r          (rank r's, padded to N)
//   e_w,r after = x_r - C(x_r) exactly, C(x) = (||x||_2 / sqrt(N)) sign(x), sign(0) = +1
//   y_j   = sum_r sign(x_r)[j] (s_r / R) + e_s,j;  e_s,j after = y_j - C(y_j)
//   m after (every rank) = [C(y_0), ..., C(y_{R-1})] cropped, bit for bit;
//   v unchanged; theta after = theta - lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^2) + eps).
TEST(OneBitAdam, CompressedStepsFollowTheTwoPhaseReference) {
  for (const int ranks : {3, 4}) {
    const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8;
    const std::int64_t freeze = 2, steps = 6;
    std::map<std::pair<std::int64_t, int>, Seen> before, after;
    std::vector<algorithms::OneBitAdam*> by_rank(static_cast<std::size_t>(ranks));
    auto make = [&](int r) {
      auto a = std::make_unique<algorithms::OneBitAdam>(one_bit_spec(freeze));
      by_rank[static_cast<std::size_t>(r)] = a.get();
      return a;
    };
    auto hook = [&](int r, std::int64_t t, bool is_after, const std::vector<at::Tensor>& params) {
      if (t == 1 && !is_after) return;  // the state is made by the first step
      const auto& a = *by_rank[static_cast<std::size_t>(r)];
      Seen s;
      for (std::size_t i = 0; i < kShapes.size(); ++i) {
        s.m.push_back(a.momentum(i).defined() ? a.momentum(i).clone() : at::zeros(kShapes[i]));
        s.v.push_back(a.variance(i).defined() ? a.variance(i).clone() : at::zeros(kShapes[i]));
        const auto ew = a.worker_error(i), es = a.server_error(i);
        s.e_w.push_back(ew.defined() ? ew.clone() : at::Tensor());
        s.e_s.push_back(es.defined() ? es.clone() : at::Tensor());
        s.params.push_back(params[i].clone());
      }
      (is_after ? after : before)[{t, r}] = std::move(s);
    };
    (void)testing::run_fixed_gradients(make, ranks, kShapes, steps, lr, hook);
    for (std::int64_t t = freeze + 1; t <= steps; ++t) {
      for (std::size_t i = 0; i < kShapes.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << ranks << " ranks, step " << t << ", tensor " << i);
        const std::int64_t n = at::zeros(kShapes[i]).numel();
        const std::int64_t unit = 32 * ranks, N = (n + unit - 1) / unit * unit, c = N / ranks;
        // Worker side.
        std::vector<at::Tensor> x(static_cast<std::size_t>(ranks)), scale(static_cast<std::size_t>(ranks));
        for (int r = 0; r < ranks; ++r) {
          const auto& b = before[{t, r}];
          // m = b1 m + (1 - b1) g, rounded as torch.optim.Adam of this LibTorch rounds it
          // (adam_moments.hpp, held to torch.optim by OptimizersAgainstPyTorch).
          auto m = b.m[i].clone();
          algorithms::optimizers::adam_first_moment_(m, testing::fixed_gradient(kShapes, r, t, i), b1);
          auto padded = at::zeros({N});
          padded.narrow(0, 0, n).copy_(m.reshape({-1}));
          x[r] = b.e_w[i].defined() ? padded.add(b.e_w[i]) : padded;
          scale[r] = scale_of(x[r]);
          const auto e_w = x[r] - scale[r] * signs_of(x[r]);
          EXPECT_TRUE(at::equal(after[{t, r}].e_w[i], e_w)) << "worker error, rank " << r;
        }
        // Server side, chunk j on rank j; phase 2 gathers the chunks.
        std::vector<at::Tensor> chunks;
        for (int j = 0; j < ranks; ++j) {
          std::vector<at::Tensor> rows, weights;
          for (int r = 0; r < ranks; ++r) {
            rows.push_back(signs_of(x[r].narrow(0, j * c, c)));
            weights.push_back(scale[r].view({1}));
          }
          auto y = at::stack(rows).mul(at::stack(weights).mul(1.0 / ranks)).sum(0);
          const auto& e_s = before[{t, j}].e_s[i];
          if (e_s.defined()) y.add_(e_s);
          const auto c_y = scale_of(y) * signs_of(y);
          EXPECT_TRUE(at::equal(after[{t, j}].e_s[i], y - c_y)) << "server error, rank " << j;
          chunks.push_back(c_y);
        }
        const auto m_avg = at::cat(chunks).narrow(0, 0, n).view(kShapes[i]);
        const auto& v_frozen = after[{freeze, 0}].v[i];
        for (int r = 0; r < ranks; ++r) {
          const auto& a = after[{t, r}];
          EXPECT_TRUE(at::equal(a.m[i], m_avg)) << "momentum, rank " << r;
          EXPECT_TRUE(at::equal(a.v[i], v_frozen)) << "variance, rank " << r;
          const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t)), bc2 = 1.0 - std::pow(b2, 2.0);
          const auto denom = (v_frozen.sqrt() / algorithms::optimizers::adam_bias_correction2_sqrt(bc2)).add_(eps);
          const auto want = before[{t, r}].params[i].addcdiv(m_avg, denom, -(lr / bc1));
          EXPECT_TRUE(at::equal(a.params[i], want)) << "parameters, rank " << r;
        }
      }
    }
  }
}

// Compressed steps: N_i sign bits and 32 T scale bits per phase-1 message to each of the
// R - 1 others (a chunk of N_i / R each) and one phase-2 block: sum_i N_i + 32 R T. R = 4:
// N = 1024, 128, 128 (multiples of 128) and T = 3: 1280 + 384 = 1664 bits. Phase 1 puts
// (R - 1) (T + sum_i N_i / 128) words = 3 (3 + 10) 4 = 156 bytes on the wire; phase 2's
// all-gather of 13 words more.
TEST(OneBitAdam, BitsPerStepInClosedForm) {
  const auto run = run_one_bit(one_bit_spec(1), 4, kShapes, 3, 0.01);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(run.n_bits[0][r], 32u * 948u);
    EXPECT_EQ(run.n_bits[1][r], 1664u);
    EXPECT_EQ(run.n_bits[2][r], 1664u);
    EXPECT_GT(run.wire_bytes[1][r], 156u);
    EXPECT_EQ(adam_of(run, r).padded_size(0), 1024);
    EXPECT_EQ(adam_of(run, r).padded_size(2), 128);
    // m, v (948 elements each), e_w (1280) and e_s (320), fp32.
    EXPECT_EQ(adam_of(run, r).state_bytes(), 4u * (2 * 948 + 1280 + 320));
  }
}

nlohmann::json scenario_with(const nlohmann::json& algorithm) {
  return {{"name", "one_bit_adam"},
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

TEST(OneBitAdam, ScenarioErrorsNameThePath) {
  const nlohmann::json base = {{"name", "one_bit_adam"}, {"lr", 0.001}};
  auto with = [&](const char* key, const nlohmann::json& value) {
    auto a = base;
    a[key] = value;
    return a;
  };
  EXPECT_EQ(error_of(with("beta1", 1.0)), "/algorithm/beta1: expected a number in [0, 1), got 1");
  EXPECT_EQ(error_of(with("beta2", 1.5)), "/algorithm/beta2: expected a number in [0, 1], got 1.5");
  EXPECT_EQ(error_of(with("freeze_step", 0)).rfind("/algorithm/freeze_step: expected an integer >= 1", 0), 0u);
  EXPECT_EQ(error_of(with("freeze_step", -3)).rfind("/algorithm/freeze_step: expected an integer >= 1", 0), 0u);
  EXPECT_EQ(error_of(with("eps", -1.0)).rfind("/algorithm/eps: expected a number in [0, ", 0), 0u);
  EXPECT_EQ(error_of(with("momentum", 0.9)).rfind("/algorithm/momentum: ", 0), 0u);
  const auto echoed = runner::parse_scenario(scenario_with(base)).to_json();
  EXPECT_EQ(echoed["algorithm"]["freeze_step"], 100000);
  EXPECT_EQ(echoed["algorithm"]["beta2"], 0.999);
  EXPECT_EQ(runner::parse_scenario(echoed).to_json(), echoed);
}

}  // namespace
}  // namespace dtsim
