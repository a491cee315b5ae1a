// algorithms/optimizers: sgd, adam and adamw against the reference's apply_gradient and against
// torch.optim itself (tests/pytorch/optimizers_reference.py, run by the PyTorch whose LibTorch
// these tests were built against: tests/python_torch.hpp) on the same fixed gradient
// sequences, and their registry, parse and state.
//
// Tolerance against PyTorch: none. Both sides run the same ATen operations (the
// single-tensor code paths) on the same operands, with the scalars computed in double as
// Python does, inside the same LibTorch library (Debian's libtorch 1.13 is what
// python3-torch loads; the torch2 venv's torch is what build/torch2 links), so the
// trajectories must agree bit for bit. A rounding difference would mean a different
// operation or order, which is what this test is for.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "algorithms/apply_gradient.hpp"
#include "algorithms/optimizers/adam.hpp"
#include "algorithms/optimizers/optimizer.hpp"
#include "algorithms/optimizers/sgd.hpp"
#include "config/scenario_error.hpp"
#include "python_torch.hpp"
#include "test_util.hpp"

namespace dtsim {
namespace {

using algorithms::optimizers::AdamSettings;
using algorithms::optimizers::OptimizerConfig;
using algorithms::optimizers::SgdSettings;
using nlohmann::json;

// Four tensors of different shapes (a matrix, a vector, a scalar-like one, a 3-D one), and
// `steps` gradients for each, fixed by a seed; lrs vary per step (a schedule's effect).
struct Sequence {
  std::vector<at::Tensor> params;
  std::vector<std::vector<at::Tensor>> grads;  // [step][tensor]
  std::vector<double> lrs;
};

Sequence sequence(int steps, at::ScalarType dtype = at::kFloat) {
  auto gen = at::detail::createCPUGenerator(48);
  Sequence s;
  for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{7, 5}, {13}, {1}, {2, 3, 4}})
    s.params.push_back(at::randn(shape, gen, at::TensorOptions(dtype)));
  for (int t = 0; t < steps; ++t) {
    std::vector<at::Tensor> g;
    // Gradients of widely different scales (1e-4 to 10), some exactly zero, so that
    // eps, the bias corrections and amsgrad's maximum all matter.
    for (const auto& p : s.params) {
      auto x = at::randn(p.sizes(), gen, at::TensorOptions(dtype)) * std::pow(10.0, (t % 6) - 4);
      if (t % 5 == 3) x.view({-1})[0] = 0.0;
      g.push_back(x);
    }
    s.grads.push_back(g);
    s.lrs.push_back(0.01 * (1.0 + 0.5 * std::sin(static_cast<double>(t))));
  }
  return s;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) out.push_back(t.clone());
  return out;
}

// The trajectory: every tensor after every step.
std::vector<std::vector<at::Tensor>> run(const OptimizerConfig& c, const Sequence& s) {
  auto opt = algorithms::optimizers::make_optimizer(c);
  auto params = clones(s.params);
  std::vector<std::vector<at::Tensor>> out;
  for (std::size_t t = 0; t < s.grads.size(); ++t) {
    opt->step(params, s.grads[t], s.lrs[t]);
    out.push_back(clones(params));
  }
  return out;
}

// The reference's SGD (algorithms/apply_gradient.hpp) and the registry's sgd: the same bits,
// in every combination of momentum, dampening, Nesterov, weight decay and a decay mask.
TEST(Optimizers, SgdIsTheReferencesApplyGradientBitForBit) {
  const auto s = sequence(12);
  for (double momentum : {0.0, 0.9})
    for (double dampening : {0.0, 0.3})
      for (bool nesterov : {false, true})
        for (double wd : {0.0, 1e-2})
          for (bool masked : {false, true}) {
            if (nesterov && (momentum == 0.0 || dampening != 0.0)) continue;
            algorithms::OptimizerSpec reference{.momentum = momentum, .dampening = dampening, .weight_decay = wd,
                                                .nesterov = nesterov};
            OptimizerConfig c{.name = "sgd",
                              .weight_decay = wd,
                              .settings = SgdSettings{.momentum = momentum, .dampening = dampening, .nesterov = nesterov}};
            if (masked) reference.weight_decay_mask = c.weight_decay_mask = {true, false, true, false};
            algorithms::LocalOptimizer local(reference);
            auto params = clones(s.params);
            const auto ours = run(c, s);
            for (std::size_t t = 0; t < s.grads.size(); ++t) {
              auto g = clones(s.grads[t]);
              local.apply_gradient(params, g, s.lrs[t]);
              for (std::size_t i = 0; i < params.size(); ++i)
                ASSERT_TRUE(at::equal(ours[t][i], params[i]))
                    << fmt::format("momentum {} dampening {} nesterov {} wd {} masked {}: step {} tensor {}", momentum,
                                   dampening, nesterov, wd, masked, t, i);
            }
          }
}

// The first Adam and AdamW step in closed form: m = (1 - b1) g and v = (1 - b2) g^2, so the
// bias-corrected moments are g and |g|, and the step is lr g / (|g| + eps) (lr sign(g) for
// |g| >> eps, 0 for g = 0); AdamW first shrinks p by (1 - lr wd), Adam adds wd p to g.
// Double precision: a few roundings of numbers near 3, hence 1e-14.
TEST(Optimizers, FirstAdamStepIsLrTimesTheSignOfTheGradient) {
  const auto p0 = at::tensor({1.0, -2.0, 3.0}, at::kDouble);
  const auto g = at::tensor({0.5, -1e-3, 0.0}, at::kDouble);
  const double lr = 0.1, eps = 1e-8, wd = 0.1;
  for (const char* name : {"adam", "adamw"}) {
    OptimizerConfig c{.name = name, .weight_decay = wd};
    auto opt = algorithms::optimizers::make_optimizer(c);
    std::vector<at::Tensor> params{p0.clone()};
    opt->step(params, {g}, lr);
    EXPECT_EQ(opt->steps(), 1);
    for (int i = 0; i < 3; ++i) {
      const double p = p0[i].item<double>();
      const double grad = std::string(name) == "adam" ? g[i].item<double>() + wd * p : g[i].item<double>();
      const double base = std::string(name) == "adamw" ? p * (1 - lr * wd) : p;
      // m_hat = g, sqrt(v_hat) = |g|: p - lr g / (|g| + eps)
      const double expected = base - lr * grad / (std::abs(grad) + eps);
      EXPECT_NEAR(params[0][i].item<double>(), expected, 1e-14) << name << " element " << i;
    }
  }
}

// State: sgd keeps one buffer per tensor with momentum and none without; adam and adamw two
// moments, three with amsgrad.
TEST(Optimizers, StateBytesAndCosts) {
  const auto s = sequence(1);
  std::int64_t elements = 0;
  for (const auto& p : s.params) elements += p.numel();
  const auto bytes = static_cast<std::uint64_t>(4 * elements);
  auto after_one_step = [&](const OptimizerConfig& c) {
    auto opt = algorithms::optimizers::make_optimizer(c);
    EXPECT_EQ(opt->state_bytes(), 0u) << c.name;
    auto params = clones(s.params);
    opt->step(params, s.grads[0], 0.1);
    EXPECT_GT(opt->cost(elements).flops, 0.0);
    EXPECT_GT(opt->cost(elements).bytes, 0.0);
    return opt->state_bytes();
  };
  EXPECT_EQ(after_one_step({.name = "sgd"}), 0u);
  EXPECT_EQ(after_one_step({.name = "sgd", .settings = SgdSettings{.momentum = 0.9}}), bytes);
  EXPECT_EQ(after_one_step({.name = "adam"}), 2 * bytes);
  EXPECT_EQ(after_one_step({.name = "adamw", .settings = AdamSettings{.amsgrad = true}}), 3 * bytes);
}

TEST(Optimizers, RegistryParseAndErrors) {
  EXPECT_EQ(algorithms::optimizers::optimizer_names(), (std::vector<std::string>{"sgd", "adam", "adamw"}));
  for (const auto* e : algorithms::optimizers::optimizer_entries()) {
    EXPECT_FALSE(e->description.empty());
    EXPECT_FALSE(e->paper.empty());
  }
  auto parse = [](const json& j) {
    config::ObjectReader o(j, "/algorithm/inner_optimizer");
    return algorithms::optimizers::parse_optimizer(o);
  };
  const auto adamw = parse({{"name", "adamw"}, {"beta2", 0.95}, {"amsgrad", true}});
  EXPECT_EQ(adamw.weight_decay, 0.01);  // PyTorch's AdamW default
  EXPECT_EQ(algorithms::optimizers::optimizer_settings<AdamSettings>(adamw).beta2, 0.95);
  EXPECT_TRUE(algorithms::optimizers::optimizer_settings<AdamSettings>(adamw).amsgrad);
  const auto echoed = algorithms::optimizers::optimizer_json(adamw);
  const auto again = parse(echoed);
  EXPECT_EQ(algorithms::optimizers::optimizer_json(again), echoed);
  auto error = [&](const json& j) -> std::string {
    try {
      parse(j);
    } catch (const config::ScenarioError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(error({{"name", "adam"}, {"momentum", 0.9}}).find("/algorithm/inner_optimizer/momentum"), std::string::npos);
  EXPECT_NE(error({{"name", "sgd"}, {"beta1", 0.9}}).find("/algorithm/inner_optimizer/beta1"), std::string::npos);
  EXPECT_NE(error({{"name", "adam"}, {"beta1", 1.0}}).find("/algorithm/inner_optimizer/beta1"), std::string::npos);
  EXPECT_NE(error({{"name", "sgd"}, {"nesterov", true}}).find("/algorithm/inner_optimizer/nesterov"), std::string::npos);
  EXPECT_NE(error({{"name", "lamb"}}).find("/algorithm/inner_optimizer/name"), std::string::npos);
  // A config built in code is checked by the optimizer's own parse reading it back.
  auto refused = [](const OptimizerConfig& c) -> std::string {
    try {
      algorithms::optimizers::make_optimizer(c);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refused({.name = "adam", .settings = AdamSettings{.beta1 = 1.5}}),
            "optimizer adam: beta1: expected a number in [0, 1], got 1.5");
  EXPECT_EQ(refused({.name = "adamw", .settings = AdamSettings{.beta2 = 1.0}}),
            "optimizer adamw: beta2: expected a number in [0, 1), got 1");
  EXPECT_EQ(refused({.name = "sgd", .settings = SgdSettings{.nesterov = true}}),
            "optimizer sgd: nesterov: nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD)");
  EXPECT_EQ(refused({.name = "sgd", .weight_decay = -1.0}), "optimizer sgd: weight_decay: expected a number in [0, inf], got -1.0");
  EXPECT_EQ(refused({.name = "adam", .settings = SgdSettings{}}), "optimizer adam: settings of another optimizer");
  EXPECT_EQ(refused({.name = "lamb"}), "optimizer 'lamb' is none of sgd, adam, adamw");
  auto opt = algorithms::optimizers::make_optimizer({.name = "adam"});
  const auto one = sequence(1);
  auto params = clones(one.params);
  opt->step(params, one.grads[0], 0.1);
  params.pop_back();
  std::vector<at::Tensor> grads(one.grads[0].begin(), one.grads[0].end() - 1);
  EXPECT_THROW(opt->step(params, grads, 0.1), std::invalid_argument);  // another tensor count
}

// --- against torch.optim ---------------------------------------------------------------

void save(const c10::impl::GenericDict& dict, const std::filesystem::path& file) {
  const auto bytes = torch::jit::pickle_save(dict);
  testing::write_file(file, std::string(bytes.begin(), bytes.end()));
}

c10::impl::GenericDict load(const std::filesystem::path& file) {
  const auto text = testing::read_file(file);
  return torch::jit::pickle_load(std::vector<char>(text.begin(), text.end())).toGenericDict();
}

at::Tensor item(const c10::impl::GenericDict& dict, const std::string& key) {
  for (const auto& kv : dict)
    if (kv.key().toStringRef() == key) return kv.value().toTensor();
  ADD_FAILURE() << "no " << key;
  return {};
}

// Writes one case's input and returns its entry of the script's case list.
json write_case(const OptimizerConfig& c, const Sequence& s, const std::filesystem::path& dir, const std::string& stem) {
  c10::impl::GenericDict in(c10::StringType::get(), c10::TensorType::get());
  for (std::size_t i = 0; i < s.params.size(); ++i) in.insert(fmt::format("p{}", i), s.params[i]);
  for (std::size_t t = 0; t < s.grads.size(); ++t)
    for (std::size_t i = 0; i < s.params.size(); ++i) in.insert(fmt::format("g{}_{}", t, i), s.grads[t][i]);
  in.insert("lr", at::tensor(s.lrs, at::kDouble));
  save(in, dir / (stem + ".in.pt"));
  json opt = algorithms::optimizers::optimizer_json(c);
  json decay = json::array();
  for (std::size_t i = 0; i < s.params.size(); ++i) decay.push_back(c.weight_decay_mask.empty() || c.weight_decay_mask[i]);
  return {{"in", (dir / (stem + ".in.pt")).string()}, {"out", (dir / (stem + ".out.pt")).string()},
          {"optimizer", opt}, {"decay", decay}};
}

// Largest |dtsim - PyTorch| over every tensor of every step, once the script has run.
double compare(const OptimizerConfig& c, const Sequence& s, const std::filesystem::path& dir, const std::string& stem) {
  const auto out = load(dir / (stem + ".out.pt"));
  const auto ours = run(c, s);
  double worst = 0.0;
  for (std::size_t t = 0; t < s.grads.size(); ++t)
    for (std::size_t i = 0; i < s.params.size(); ++i) {
      const auto theirs = item(out, fmt::format("s{}_{}", t, i));
      worst = std::max(worst, (ours[t][i] - theirs).abs().max().item<double>());
    }
  return worst;
}

TEST(OptimizersAgainstPyTorch, SameTrajectoriesBitForBit) {
  const auto python = testing::python_with_torch();
  if (python.empty() && testing::python_with_torch_required()) FAIL() << testing::no_python_with_torch();
  if (python.empty()) GTEST_SKIP() << testing::no_python_with_torch();
  const auto dir = testing::fresh_dir("optimizers-pytorch");
  const auto s = sequence(20);
  const auto d = sequence(20, at::kDouble);
  const std::vector<std::pair<std::string, OptimizerConfig>> cases{
      {"sgd_plain", {.name = "sgd"}},
      {"sgd_momentum_wd", {.name = "sgd", .weight_decay = 1e-2, .settings = SgdSettings{.momentum = 0.9, .dampening = 0.1}}},
      {"sgd_nesterov_masked",
       {.name = "sgd",
        .weight_decay = 5e-2,
        .settings = SgdSettings{.momentum = 0.9, .nesterov = true},
        .weight_decay_mask = {true, false, true, true}}},
      {"adam", {.name = "adam"}},
      {"adam_l2_amsgrad",
       {.name = "adam",
        .weight_decay = 1e-2,
        .settings = AdamSettings{.beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .amsgrad = true}}},
      {"adamw", {.name = "adamw", .weight_decay = 0.1}},
      {"adamw_amsgrad_masked",
       {.name = "adamw",
        .weight_decay = 0.1,
        .settings = AdamSettings{.beta2 = 0.99, .amsgrad = true},
        .weight_decay_mask = {false, true, true, false}}}};
  json spec = {{"cases", json::array()}};
  for (const auto& [stem, c] : cases) {
    spec["cases"].push_back(write_case(c, s, dir, stem));
    spec["cases"].push_back(write_case(c, d, dir, stem + "_fp64"));
  }
  testing::write_file(dir / "cases.json", spec.dump());
  const auto r = testing::run_command(python + " " + DTSIM_SOURCE_DIR + "/tests/pytorch/optimizers_reference.py " +
                                      (dir / "cases.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& [stem, c] : cases) {
    const double fp32 = compare(c, s, dir, stem);
    const double fp64 = compare(c, d, dir, stem + "_fp64");
    std::printf("%-22s max |dtsim - torch.optim| fp32 %.3g  fp64 %.3g over 20 steps\n", stem.c_str(), fp32, fp64);
    EXPECT_EQ(fp32, 0.0) << stem;
    EXPECT_EQ(fp64, 0.0) << stem;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtsim
