// dtsim_training_bench: what emulation costs over plain LibTorch doing the same learning work.
//
//   dtsim_training_bench [--case resnet20|gpt|all] [--rounds N] [--json FILE]
//
// Each case is a scenario run emulated (`dtsim run`'s code path) and, in the same process, a
// plain LibTorch loop doing the same work with the same model: R replicas, each taking S steps
// of forward, backward and an SGD update with momentum on a batch of its own, then the same
// evaluations (the scenario's eval_every points and the final one, each over the training and
// held-out samples the workload evaluates), written as a PyTorch user would (torch::nn or the
// functional model under autograd, torch::optim::SGD, evaluation under NoGradGuard in batches
// of 32 sequences or images). What the plain loop leaves out is what dtsim adds: the
// algorithm's communication (an all-reduce of the gradients, emulated), the network model and
// the event engine, the per-step records.
//
// Rounds alternate emulated and plain; `ratio` is emulated wall over plain wall per round, the
// median reported. Goal (issue 48): at most 1.2 for every model.
#include <CLI/CLI.hpp>

#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "workloads/data_source.hpp"
#include "workloads/gpt_model.hpp"
#include "workloads/resnet20_model.hpp"

namespace {

using namespace dtsim;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Case {
  std::string name;
  json scenario;
  // The plain loop over the scenario's model and data; returns a figure that depends on the
  // whole computation (so none of it can be skipped).
  double (*plain)(const runner::Scenario& s);
};

// Evaluations a run makes: one after every eval_every-th step before the last, and the final one.
std::int64_t evaluations(const runner::Scenario& s) {
  return (s.eval_every > 0 ? (s.steps - 1) / s.eval_every : 0) + 1;
}

constexpr std::int64_t kEvalBatch = 32;

double plain_resnet20(const runner::Scenario& s) {
  const auto data = workloads::load_data_source(s.workload.data, s.seed);
  const auto classes = data->train_y.max().item<std::int64_t>() + 1;
  const auto channels = data->train_x.size(1);
  std::vector<torch::nn::AnyModule> replicas;
  std::vector<std::unique_ptr<torch::optim::SGD>> optimizers;
  const auto& a = s.algorithm.optimizer;
  for (int r = 0; r < s.ranks; ++r) {
    auto model = workloads::make_resnet20_model(channels, classes, s.seed);
    replicas.push_back(model.module);
    optimizers.push_back(std::make_unique<torch::optim::SGD>(
        model.module.ptr()->parameters(),
        torch::optim::SGDOptions(a.lr).momentum(a.momentum).nesterov(a.nesterov).weight_decay(a.weight_decay)));
  }
  const auto batch = s.workload.batch_size, n = data->train_x.size(0);
  auto gen = at::detail::createCPUGenerator(s.seed);
  double check = 0.0;
  auto evaluate = [&](torch::nn::AnyModule& m, const at::Tensor& x, const at::Tensor& y) {
    torch::NoGradGuard no_grad;
    m.ptr()->eval();
    for (std::int64_t b = 0; b < x.size(0); b += kEvalBatch) {
      const auto len = std::min(kEvalBatch, x.size(0) - b);
      const auto z = m.forward(x.narrow(0, b, len));
      check += torch::nn::functional::cross_entropy(z, y.narrow(0, b, len)).item<double>();
    }
    m.ptr()->train();
  };
  for (std::int64_t t = 1; t <= s.steps; ++t) {
    for (int r = 0; r < s.ranks; ++r) {
      const auto idx = at::randint(n, {batch}, gen, at::kLong);
      optimizers[r]->zero_grad();
      const auto loss = torch::nn::functional::cross_entropy(replicas[r].forward(data->train_x.index_select(0, idx)),
                                                             data->train_y.index_select(0, idx));
      loss.backward();
      optimizers[r]->step();
      check += loss.item<double>();
    }
    if ((s.eval_every > 0 && t % s.eval_every == 0 && t < s.steps) || t == s.steps) {
      evaluate(replicas[0], data->train_x, data->train_y);
      evaluate(replicas[0], data->test_x, data->test_y);
    }
  }
  return check;
}

double plain_gpt(const runner::Scenario& s) {
  const auto data = workloads::load_data_source(s.workload.data, s.seed);
  const auto& spec = workloads::settings_of<workloads::GptSpec>(s.workload);
  std::vector<std::vector<at::Tensor>> replicas;
  std::vector<std::unique_ptr<torch::optim::SGD>> optimizers;
  const auto& a = s.algorithm.optimizer;
  for (int r = 0; r < s.ranks; ++r) {
    auto params = workloads::gpt_initial_parameters(spec, s.seed);
    for (auto& p : params) p.requires_grad_(true);
    optimizers.push_back(std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(a.lr).momentum(a.momentum).nesterov(a.nesterov).weight_decay(a.weight_decay)));
    replicas.push_back(std::move(params));
  }
  // The corpus is one token stream (x[i + 1] = y[i]): windows start anywhere.
  const auto tokens_in = data->train_x.size(0) - spec.context, batch = s.workload.batch_size;
  auto gen = at::detail::createCPUGenerator(s.seed);
  const auto window = at::arange(spec.context, at::kLong);
  auto windows = [&](const at::Tensor& x, const at::Tensor& y, const at::Tensor& starts) {
    const auto idx = (starts.unsqueeze(1) + window).view({-1});
    const auto rows = starts.size(0);
    return std::pair{x.index_select(0, idx).view({rows, spec.context}).to(at::kLong),
                     y.index_select(0, idx).view({rows, spec.context}).to(at::kLong)};
  };
  double check = 0.0;
  auto evaluate = [&](const std::vector<at::Tensor>& params, const at::Tensor& x, const at::Tensor& y) {
    torch::NoGradGuard no_grad;
    const auto n = x.size(0) - spec.context, w = std::min(spec.eval_windows == 0 ? n : spec.eval_windows, n);
    std::vector<std::int64_t> offsets;
    for (std::int64_t j = 0; j < w; ++j) offsets.push_back(j * n / w);
    const auto starts = at::tensor(offsets, at::kLong);
    for (std::int64_t b = 0; b < w; b += kEvalBatch) {
      const auto [tx, ty] = windows(x, y, starts.narrow(0, b, std::min(kEvalBatch, w - b)));
      check += workloads::gpt_loss(spec, params, tx, ty).item<double>();
    }
  };
  for (std::int64_t t = 1; t <= s.steps; ++t) {
    for (int r = 0; r < s.ranks; ++r) {
      const auto [tx, ty] = windows(data->train_x, data->train_y, at::randint(tokens_in, {batch}, gen, at::kLong));
      optimizers[r]->zero_grad();
      const auto loss = workloads::gpt_loss(spec, replicas[r], tx, ty);
      loss.backward();
      optimizers[r]->step();
      check += loss.item<double>();
    }
    if ((s.eval_every > 0 && t % s.eval_every == 0 && t < s.steps) || t == s.steps) {
      evaluate(replicas[0], data->train_x, data->train_y);
      evaluate(replicas[0], data->test_x, data->test_y);
    }
  }
  return check;
}

std::vector<Case> cases() {
  const json network = {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1.25}};
  const json sgd = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.05}, {"momentum", 0.9}};
  return {
      {"resnet20",
       {{"name", "bench_resnet20"}, {"ranks", 4}, {"steps", 40}, {"seed", 1}, {"eval_every", 20},
        {"workload", {{"type", "resnet20_real"}, {"data", "fashion_mnist"}, {"image_size", 32},
                      {"data_dir", "/usr/share/datasets/fashion-mnist"}, {"train_samples", 2048},
                      {"test_samples", 1024}, {"batch_size", 32}}},
        {"algorithm", sgd}, {"topology", {{"kind", "ring"}}}, {"network", network}},
       plain_resnet20},
      {"gpt",
       {{"name", "bench_gpt"}, {"ranks", 4}, {"steps", 40}, {"seed", 1}, {"eval_every", 20},
        {"workload", {{"type", "gpt"}, {"data", "text"}, {"layers", 2}, {"heads", 4}, {"width", 128},
                      {"context", 64}, {"batch_size", 16}, {"eval_windows", 128}}},
        {"algorithm", sgd}, {"topology", {{"kind", "ring"}}}, {"network", network}},
       plain_gpt},
  };
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Emulated training against plain LibTorch doing the same work, wall-time ratio per model"};
  std::string which = "all", json_file;
  int rounds = 3;
  app.add_option("--case", which, "resnet20, gpt or all")->check(CLI::IsMember({"resnet20", "gpt", "all"}));
  app.add_option("--rounds", rounds, "Rounds of (emulated, plain) per case; the median ratio is reported")
      ->check(CLI::Range(1, 100));
  app.add_option("--json", json_file, "Also write the figures as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    json out = json::array();
    fmt::print("{:<10} {:>6} {:>12} {:>10} {:>7}\n", "case", "round", "emulated_s", "plain_s", "ratio");
    for (const auto& c : cases()) {
      if (which != "all" && which != c.name) continue;
      const auto scenario = runner::parse_scenario(c.scenario);
      std::vector<double> emulated, plain, ratios;
      for (int k = 0; k < rounds; ++k) {
        auto start = Clock::now();
        const auto result = runner::run_emulated(scenario);
        emulated.push_back(seconds_since(start));
        start = Clock::now();
        const double check = c.plain(scenario);
        plain.push_back(seconds_since(start));
        ratios.push_back(emulated.back() / plain.back());
        fmt::print("{:<10} {:>6} {:>12.3f} {:>10.3f} {:>7.3f}   (plain check {:.4g}, {} evaluations)\n", c.name, k,
                   emulated.back(), plain.back(), ratios.back(), check, evaluations(scenario));
        std::fflush(stdout);
      }
      fmt::print("{:<10} {:>6} {:>12.3f} {:>10.3f} {:>7.3f}   median\n", c.name, "", median(emulated), median(plain),
                 median(ratios));
      out.push_back({{"case", c.name}, {"ranks", scenario.ranks}, {"steps", scenario.steps},
                     {"emulated_s", emulated}, {"plain_s", plain}, {"ratio", ratios}, {"median_ratio", median(ratios)}});
    }
    if (!json_file.empty()) std::ofstream(json_file) << out.dump(2) << '\n';
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsim_training_bench: %s\n", e.what());
    return 1;
  }
}
