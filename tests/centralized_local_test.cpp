// Centralized compressed algorithms (sparsified SGD with memory, sign SGD, EF-sign SGD)
// and the local-SGD family (local SGD, post-local SGD, local sign SGD, local EF-sign SGD):
// exact equivalences with parallel SGD, replicas after sync steps, error-feedback
// invariants, majority vote, n_bits, and convergence on logistic regression.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>

#include "algorithms/ef_sign_sgd.hpp"
#include "algorithms/local_ef_sign_sgd.hpp"
#include "algorithms/local_sgd.hpp"
#include "algorithms/sign_sgd.hpp"
#include "algorithms/sparsified_sgd.hpp"
#include "comm/emulated.hpp"
#include "comm/phase_timer.hpp"
#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"
#include "runner/run.hpp"
#include "sim/engine.hpp"
#include "workloads/logistic_regression.hpp"

namespace dtsim {
namespace {

using nlohmann::json;

json scenario_doc(const json& algorithm, int ranks, int steps, int features, const std::string& topology = "complete") {
  return {{"name", "t"},
          {"ranks", ranks},
          {"steps", steps},
          {"seed", 5},
          {"workload", {{"kind", "logistic_regression"}, {"samples", 1024}, {"features", features}, {"batch_size", 16}}},
          {"algorithm", algorithm},
          {"topology", {{"kind", topology}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 2}, {"bandwidth_GBps", 1}}}};
}

// What one rank had after one step.
struct Record {
  at::Tensor params;  // flat copy
  at::Tensor grads;   // flat copy: d for the algorithms that write it back
  std::uint64_t n_bits = 0;
  std::uint64_t wire_bytes = 0;
};

// Called on every rank before (after = false) and after each step.
using Hook = std::function<void(int rank, std::int64_t t, algorithms::Algorithm&, bool after,
                                const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads)>;

struct Trace {
  std::vector<std::vector<Record>> steps;  // [t - 1][rank]
  std::vector<std::unique_ptr<algorithms::Algorithm>> algorithms;
};

at::Tensor flat(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> views;
  for (const auto& t : tensors) views.push_back(t.reshape({-1}));
  return at::cat(views).clone();
}

sim::Task<void> rank_loop(comm::Communicator& comm, const runner::Scenario& s,
                          std::shared_ptr<const workloads::SyntheticDataset> data, Trace& trace, const Hook& hook) {
  const int rank = comm.rank();
  auto workload = workloads::make_logistic_regression(workloads::settings_of<workloads::LogisticRegressionSpec>(s.workload), data, s.seed, rank, s.ranks);
  auto& algorithm = *trace.algorithms[rank];
  auto params = workload->initial_parameters();
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(at::zeros_like(p));
  comm::PhaseTimer timer(comm);
  const auto cost = workload->backward_cost();
  for (std::int64_t t = 1; t <= s.steps; ++t) {
    co_await comm.compute(cost, [&] {
      workload->forward(params);
      workload->backward(params, grads);
    });
    if (hook) hook(rank, t, algorithm, false, params, grads);
    const auto before = comm.traffic().wire_bytes;
    algorithms::StepContext ctx{comm, timer, params, grads, t, s.algorithm.optimizer.lr};
    ctx.epoch = static_cast<double>(t) /
                static_cast<double>(algorithms::steps_per_epoch(workload->data_shard().samples, workload->data_shard().batch));
    const auto bits = co_await algorithm.step(ctx);
    if (hook) hook(rank, t, algorithm, true, params, grads);
    trace.steps[t - 1][rank] = Record{flat(params), flat(grads), bits, comm.traffic().wire_bytes - before};
    timer.take_step();
  }
}

// Runs `algorithm` for `steps` steps on `ranks` emulated ranks, recording every rank's
// parameters after every step.
Trace run_steps(const json& algorithm, int ranks, int steps, int features = 8, const Hook& hook = {},
                const std::string& topology = "complete") {
  const auto s = runner::parse_scenario(scenario_doc(algorithm, ranks, steps, features, topology));
  sim::Engine engine;
  auto network =
      std::make_shared<net::Network>(engine, net::make_topology(s.topology, s.ranks, s.network.nominal), s.network);
  comm::EmulatedWorld world(engine, network, s.compute);
  auto data = workloads::logistic_dataset(*workloads::load_data_source(s.workload.data, s.seed));
  Trace trace;
  trace.steps.assign(static_cast<std::size_t>(steps), std::vector<Record>(static_cast<std::size_t>(ranks)));
  for (int r = 0; r < ranks; ++r) trace.algorithms.push_back(algorithms::make_algorithm(s.algorithm, network->topology(), r));
  for (int r = 0; r < ranks; ++r) engine.spawn(rank_loop(world.communicator(r), s, data, trace, hook), "rank");
  engine.run();
  return trace;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Every rank of `a` and `b` within `tol` after every step.
void expect_same_trajectory(const Trace& a, const Trace& b, double tol) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t t = 0; t < a.steps.size(); ++t)
    for (std::size_t r = 0; r < a.steps[t].size(); ++r)
      ASSERT_LE(max_abs_diff(a.steps[t][r].params, b.steps[t][r].params), tol) << "step " << t + 1 << " rank " << r;
}

bool replicas_identical(const std::vector<Record>& step) {
  for (const auto& r : step)
    if (!at::equal(r.params, step[0].params)) return false;
  return true;
}

const json kMomentum = {{"momentum", 0.9}, {"nesterov", true}, {"weight_decay", 1e-3}};

json with(json base, const json& extra) {
  for (auto& [k, v] : extra.items()) base[k] = v;
  return base;
}

// ---------------------------------------------------------------------------------------
// Local SGD

// H = 1: every step is x_i <- mean_r (x_r - lr d_r) with local momentum, which is D-PSGD
// (adapt-then-combine) on the complete graph with W = 1/n.
TEST(LocalSgd, H1IsParameterAveragingAfterEachLocalStep) {
  const json local = with({{"name", "local_sgd"}, {"lr", 0.3}, {"local_steps", 1}}, kMomentum);
  const json dpsgd = with({{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.3}}, kMomentum);
  auto a = run_steps(local, 4, 25);
  auto b = run_steps(dpsgd, 4, 25);
  expect_same_trajectory(a, b, 1e-6);
  for (const auto& step : a.steps) EXPECT_TRUE(replicas_identical(step));
}

// Without momentum, averaging models after one step equals averaging gradients.
TEST(LocalSgd, H1WithoutMomentumIsCentralizedParallelSgd) {
  const json local = {{"name", "local_sgd"}, {"lr", 0.3}, {"weight_decay", 1e-3}, {"local_steps", 1}};
  const json central = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.3}, {"weight_decay", 1e-3}};
  auto a = run_steps(local, 4, 25);
  auto b = run_steps(central, 4, 25);
  expect_same_trajectory(a, b, 1e-6);
  // With H = 2 they differ: the comparison can fail.
  auto c = run_steps(with(local, {{"local_steps", 2}}), 4, 25);
  EXPECT_GT(max_abs_diff(c.steps.back()[0].params, b.steps.back()[0].params), 1e-4);
}

// Post-local SGD: every step syncs before step 6, then every 4th; replicas are identical
// bit for bit after each sync step and drift apart between them; n_bits is 32 d on a
// sync step and 0 otherwise, and nothing goes on the wire on a local step.
TEST(LocalSgd, ReplicasIdenticalAfterEverySyncStep) {
  const std::vector<json> family = {
      with({{"name", "local_sgd"}, {"lr", 0.3}}, kMomentum),
      with({{"name", "local_sign_sgd"}, {"lr", 0.02}}, kMomentum),
      with({{"name", "local_ef_sign_sgd"}, {"lr", 0.3}, {"packed_signs", false}}, kMomentum),
      with({{"name", "local_ef_sign_sgd"}, {"lr", 0.3}, {"packed_signs", true}}, kMomentum)};
  for (auto alg : family) {
    alg["local_steps"] = 4;
    alg["turn_on_local_steps_from"] = 6;
    SCOPED_TRACE(alg.dump());
    auto trace = run_steps(alg, 4, 21, 40);  // d = 41, L = 2
    const std::uint64_t d = 41, L = 2;
    const bool packed = alg.value("packed_signs", false);
    const std::uint64_t sync_bits = alg["name"] == "local_sgd" ? 32 * d : (packed ? 32 * 2 + 32 * L : 32 * d + 32 * L);
    int drifted = 0;
    for (std::int64_t t = 1; t <= 21; ++t) {
      const auto& step = trace.steps[t - 1];
      const bool sync = t < 6 || t % 4 == 0;
      if (sync) { EXPECT_TRUE(replicas_identical(step)) << "step " << t; }
      if (!sync && !replicas_identical(step)) ++drifted;
      for (const auto& r : step) {
        EXPECT_EQ(r.n_bits, sync ? sync_bits : 0) << "step " << t;
        if (!sync) { EXPECT_EQ(r.wire_bytes, 0u) << "step " << t; }
        if (sync) { EXPECT_GT(r.wire_bytes, 0u) << "step " << t; }
      }
    }
    EXPECT_EQ(drifted, 12);  // steps 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21
  }
}

// Local EF-sign SGD: e' + s sigma = (x_bar - x) + e on every sync step, per tensor, in
// both exchanges; with the 1-bit exchange sigma is +-1.
TEST(LocalEfSignSgd, MemoryInvariant) {
  for (bool packed : {false, true}) {
    SCOPED_TRACE(packed ? "packed" : "fp32");
    std::vector<at::Tensor> e_old(4);
    std::vector<double> worst(4, 0.0);
    int checked = 0;
    Hook hook = [&](int rank, std::int64_t t, algorithms::Algorithm& alg, bool after, const std::vector<at::Tensor>&,
                    const std::vector<at::Tensor>&) {
      auto& a = dynamic_cast<algorithms::LocalEfSignSgd&>(alg);
      if (t == 1 || t % 3 != 0) return;  // sync steps: 3, 6, 9, ...
      if (!after) {
        e_old[rank] = a.memory().clone();
        return;
      }
      const auto& s = a.own_scales();
      auto sent = a.own_signs().clone();
      sent.narrow(0, 0, 40).mul_(s[0].item<float>());
      sent.narrow(0, 40, 1).mul_(s[1].item<float>());
      const auto lhs = a.memory() + sent;
      const auto rhs = a.input() + e_old[rank];
      worst[rank] = std::max(worst[rank], max_abs_diff(lhs, rhs) / (1e-12 + rhs.abs().max().item<double>()));
      if (packed) { EXPECT_TRUE(at::equal(a.own_signs().abs(), at::ones_like(a.own_signs()))); }
      EXPECT_GT(a.memory().abs().sum().item<double>(), 0.0);  // memory is not trivially 0
      ++checked;
    };
    const json alg = {{"name", "local_ef_sign_sgd"}, {"lr", 0.2}, {"local_steps", 3}, {"packed_signs", packed}};
    run_steps(alg, 4, 15, 40, hook);
    EXPECT_EQ(checked, 5 * 4);  // sync steps 3, 6, 9, 12, 15 on 4 ranks
    for (double w : worst) EXPECT_LE(w, 1e-6);
  }
}

// ---------------------------------------------------------------------------------------
// Sparsified SGD with memory

// Keeping every coordinate, the memory stays 0 and the update is the average gradient:
// parallel SGD (momentum and weight decay are linear, so local buffers average to the
// buffer of the average). n_bits = 96 d.
TEST(SparsifiedSgd, RatioOneIsParallelSgd) {
  const json sparse = with({{"name", "sparsified_sgd"}, {"lr", 0.3}, {"compressor", {{"kind", "top_k"}, {"ratio", 1.0}}}},
                           kMomentum);
  const json central = with({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.3}}, kMomentum);
  auto a = run_steps(sparse, 4, 25);
  auto b = run_steps(central, 4, 25);
  expect_same_trajectory(a, b, 1e-5);
  for (const auto& step : a.steps)
    for (const auto& r : step) EXPECT_EQ(r.n_bits, 96u * 9u);
  for (auto& alg : a.algorithms)
    EXPECT_EQ(dynamic_cast<algorithms::SparsifiedSgd&>(*alg).memory().abs().max().item<double>(), 0.0);
}

// sent + new memory = d + old memory, bit for bit, for top-k and random-k; the memory is
// 0 at the sent coordinates, and with mask_momentum so is the momentum buffer. n_bits =
// 96 k with k = floor(0.1 * 40) + max(1, floor(0.1 * 1)) = 5.
TEST(SparsifiedSgd, MemoryInvariantIsExact) {
  for (const char* kind : {"top_k", "random_k"}) {
    SCOPED_TRACE(kind);
    std::vector<at::Tensor> m_old(4);
    int checked = 0;
    Hook hook = [&](int rank, std::int64_t, algorithms::Algorithm& alg, bool after, const std::vector<at::Tensor>&,
                    const std::vector<at::Tensor>& grads) {
      auto& a = dynamic_cast<algorithms::SparsifiedSgd&>(alg);
      if (!after) {
        m_old[rank] = a.memory().defined() ? a.memory().clone() : at::zeros({41});
        return;
      }
      at::Tensor sent = at::zeros({41});
      a.compressor().decompress(a.sent(), sent);
      const auto d = flat(grads);  // apply_gradient wrote d into the gradients
      EXPECT_TRUE(at::equal(sent + a.memory(), d + m_old[rank]));
      // The sent coordinates, from the wire layout: 5 uint32 indices (4 into the weight,
      // 1 into the bias), then the values.
      ASSERT_EQ(a.sent().bytes.numel(), 5 * 8);
      const auto* idx = reinterpret_cast<const std::uint32_t*>(a.sent().bytes.data_ptr<std::uint8_t>());
      at::Tensor at_sent = at::zeros({41}, at::kBool);
      for (int j = 0; j < 5; ++j) at_sent[(j < 4 ? 0 : 40) + idx[j]] = true;
      EXPECT_EQ(at_sent.sum().item<std::int64_t>(), 5);
      EXPECT_EQ(a.memory().masked_select(at_sent).abs().sum().item<double>(), 0.0);
      EXPECT_TRUE(at::equal(sent.masked_select(at_sent), (d + m_old[rank]).masked_select(at_sent)));
      auto& buffers = a.optimizer().momentum_buffers();
      EXPECT_EQ(flat(buffers).masked_select(at_sent).abs().sum().item<double>(), 0.0);
      EXPECT_GT(flat(buffers).abs().sum().item<double>(), 0.0);
      ++checked;
    };
    const json alg = {{"name", "sparsified_sgd"},
                      {"lr", 0.3},
                      {"momentum", 0.9},
                      {"mask_momentum", true},
                      {"compressor", {{"kind", kind}, {"ratio", 0.1}}}};
    auto trace = run_steps(alg, 4, 10, 40, hook);
    EXPECT_EQ(checked, 40);
    for (const auto& step : trace.steps) {
      EXPECT_TRUE(replicas_identical(step));  // every rank applies the same gathered update
      for (const auto& r : step) EXPECT_EQ(r.n_bits, 96u * 5u);
    }
  }
}

// 1-bit SGD with error feedback (Seide et al. 2014) and the other dense quantizers with
// memory: every rank all-gathers C(d + m) and keeps m' = d + m - decode(C(d + m)), so
// sent + m' = d + m up to the fp32 rounding of that one subtraction; all ranks apply the
// same mean; n_bits are the payload's bits (one_bit here: two fp32 means per tensor and
// the 41 sign bits in two 32-bit words, 2 x 64 + 64 = 192; scaled_sign one scale per
// tensor and the same words, 2 x 32 + 64 = 128; fp16 16 x 41 = 656). Identity, which
// keeps nothing back, is refused.
TEST(SparsifiedSgd, DenseQuantizersKeepTheirErrorInTheMemory) {
  const std::map<std::string, std::uint64_t> payload_bits{{"one_bit", 192}, {"scaled_sign", 128}, {"fp16", 656}};
  for (const char* kind : {"one_bit", "terngrad", "natural", "scaled_sign", "fp16"}) {
    SCOPED_TRACE(kind);
    std::vector<at::Tensor> m_old(4);
    int checked = 0;
    Hook hook = [&](int rank, std::int64_t, algorithms::Algorithm& alg, bool after, const std::vector<at::Tensor>&,
                    const std::vector<at::Tensor>& grads) {
      auto& a = dynamic_cast<algorithms::SparsifiedSgd&>(alg);
      if (!after) {
        m_old[rank] = a.memory().defined() ? a.memory().clone() : at::zeros({41});
        return;
      }
      at::Tensor sent = at::zeros({41});
      a.compressor().decompress(a.sent(), sent);
      const auto kept = flat(grads) + m_old[rank];
      const auto bound = (kept.abs() + sent.abs()) * std::ldexp(1.0, -23);
      EXPECT_TRUE(((sent + a.memory() - kept).abs() <= bound).all().item<bool>());
      EXPECT_GT(a.memory().abs().sum().item<double>(), 0.0);  // a quantizer's error is kept back
      ++checked;
    };
    const json alg = {{"name", "sparsified_sgd"}, {"lr", 0.3}, {"momentum", 0.9}, {"compressor", {{"kind", kind}}}};
    auto trace = run_steps(alg, 4, 10, 40, hook);
    EXPECT_EQ(checked, 40);
    for (const auto& step : trace.steps) {
      EXPECT_TRUE(replicas_identical(step));
      if (payload_bits.contains(kind)) {
        for (const auto& r : step) EXPECT_EQ(r.n_bits, payload_bits.at(kind));
      }
    }
  }
  // mask_momentum needs the sent indices: refused when the scenario is loaded, at the field.
  const json masked = {{"name", "sparsified_sgd"}, {"lr", 0.3}, {"mask_momentum", true}, {"compressor", {{"kind", "one_bit"}}}};
  try {
    run_steps(masked, 4, 1, 40);
    ADD_FAILURE() << "mask_momentum with one_bit was accepted";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/algorithm/mask_momentum");
    EXPECT_NE(std::string(e.what()).find("mask_momentum needs the sent indices; one_bit sends every element"),
              std::string::npos)
        << e.what();
  }
  const json whole = {{"name", "sparsified_sgd"}, {"lr", 0.3}, {"compressor", {{"kind", "identity"}}}};
  try {
    run_steps(whole, 4, 1, 40);
    ADD_FAILURE() << "identity was accepted";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/algorithm/compressor");
    EXPECT_NE(std::string(e.what()).find("identity sends the gradient whole"), std::string::npos) << e.what();
  }
}

// state_bytes is the model-sized state each keeps between steps, in copies of the
// 41-element fp32 model: the memory m (none with qsgd), e, x-bar, x-bar and e.
TEST(CentralizedLocal, StateBytesCountTheModelSizedStateKept) {
  const std::vector<std::pair<json, std::uint64_t>> cases{
      {{{"name", "sparsified_sgd"}, {"lr", 0.3}, {"compressor", {{"kind", "top_k"}, {"ratio", 0.1}}}}, 1},
      {{{"name", "sparsified_sgd"}, {"lr", 0.3}, {"compressor", {{"kind", "one_bit"}}}}, 1},
      {{{"name", "sparsified_sgd"}, {"lr", 0.3}, {"compressor", {{"kind", "qsgd"}}}}, 0},
      {{{"name", "ef_sign_sgd"}, {"lr", 0.01}}, 1},
      {{{"name", "local_sgd"}, {"lr", 0.3}, {"local_steps", 2}}, 1},
      {{{"name", "local_sign_sgd"}, {"lr", 0.01}, {"local_steps", 2}}, 1},
      {{{"name", "local_ef_sign_sgd"}, {"lr", 0.01}, {"local_steps", 2}}, 2},
      {{{"name", "sign_sgd"}, {"lr", 0.01}}, 0}};
  for (const auto& [alg, copies] : cases) {
    SCOPED_TRACE(alg.dump());
    const auto trace = run_steps(alg, 4, 3, 40);
    for (const auto& a : trace.algorithms) EXPECT_EQ(a->state_bytes(), copies * 41 * 4);
  }
}

// QSGD: no memory, an all-reduce of the quantized values; n_bits = log2(levels + 1) d.
TEST(SparsifiedSgd, QsgdAllReduce) {
  const json alg = {{"name", "sparsified_sgd"}, {"lr", 0.3}, {"compressor", {{"kind", "qsgd"}, {"levels", 15}}}};
  auto trace = run_steps(alg, 4, 10, 40);
  for (const auto& step : trace.steps) {
    EXPECT_TRUE(replicas_identical(step));
    for (const auto& r : step) EXPECT_EQ(r.n_bits, 4u * 41u);
  }
  EXPECT_GT(trace.steps.back()[0].params.abs().sum().item<double>(), 0.0);
}

// The reference DGC's clipping: after weight decay and before momentum, each tensor's d =
// g + wd x is scaled to norm c / sqrt(n) when its norm is at least that. With a huge c
// nothing is clipped (the unclipped run, bit for bit); with a tiny c no tensor's d exceeds
// norm c / 2 on 4 ranks and some sit on it; with the median norm, each tensor follows the
// formula, and both branches occur.
TEST(SparsifiedSgd, ClipsEachTensorsGradientNorm) {
  const json base = {{"name", "sparsified_sgd"},
                     {"lr", 0.3},
                     {"weight_decay", 1e-2},
                     {"compressor", {{"kind", "top_k"}, {"ratio", 0.25}}}};
  std::vector<std::vector<at::Tensor>> g_before(4), x_before(4);
  std::vector<double> norms;  // |g + wd x| per tensor and step, unclipped
  int clipped = 0, kept = 0;
  double c = 0.0;
  Hook hook = [&](int rank, std::int64_t, algorithms::Algorithm&, bool after, const std::vector<at::Tensor>& params,
                  const std::vector<at::Tensor>& grads) {
    if (!after) {
      g_before[rank].clear();
      x_before[rank].clear();
      for (const auto& g : grads) g_before[rank].push_back(g.clone());
      for (const auto& x : params) x_before[rank].push_back(x.clone());
      return;
    }
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const at::Tensor d = g_before[rank][i] + 1e-2 * x_before[rank][i];
      const double norm = d.norm().item<double>();
      if (c == 0.0) {
        norms.push_back(norm);
        continue;
      }
      const double threshold = c / 2.0;  // sqrt(4 ranks)
      const at::Tensor expected = norm >= threshold ? d * (threshold / norm) : d;
      (norm >= threshold ? clipped : kept) += 1;
      EXPECT_LE(max_abs_diff(grads[i], expected), 1e-6 * (1.0 + expected.abs().max().item<double>()));
    }
  };
  const auto unclipped = run_steps(base, 4, 8, 40, hook);
  ASSERT_FALSE(norms.empty());
  std::sort(norms.begin(), norms.end());
  c = 2.0 * norms[norms.size() / 2];  // the median norm as the threshold: both branches
  run_steps(with(base, {{"clip_grad_norm", c}}), 4, 8, 40, hook);
  EXPECT_GT(clipped, 0);
  EXPECT_GT(kept, 0);
  c = 0.0;

  expect_same_trajectory(run_steps(with(base, {{"clip_grad_norm", 1e30}}), 4, 8, 40), unclipped, 0.0);
  int at_bound = 0;
  Hook tiny = [&](int, std::int64_t, algorithms::Algorithm&, bool after, const std::vector<at::Tensor>&,
                  const std::vector<at::Tensor>& grads) {
    if (!after) return;
    for (const auto& d : grads) {
      const double norm = d.norm().item<double>();
      EXPECT_LE(norm, 1e-4 / 2.0 * (1.0 + 1e-6));
      at_bound += std::abs(norm - 1e-4 / 2.0) <= 1e-4 / 2.0 * 1e-6 ? 1 : 0;
    }
  };
  run_steps(with(base, {{"clip_grad_norm", 1e-4}}), 4, 3, 40, tiny);
  EXPECT_GT(at_bound, 0);
}

// ---------------------------------------------------------------------------------------
// Sign SGD and EF-sign SGD

// decode(sign) as on the wire: +1 for x >= 0, -1 below.
at::Tensor wire_sign(const at::Tensor& x) { return at::where(x < 0, at::full_like(x, -1.0), at::ones_like(x)); }

// With an odd number of ranks there are no ties: the update is sign(sum_r sign(d_r)),
// never 0. Without majority vote it is the mean of the signs. n_bits = 32 ceil(d/32).
TEST(SignSgd, MajorityVoteWithOddRanksIsSignOfSum) {
  for (bool vote : {true, false}) {
    SCOPED_TRACE(vote ? "majority vote" : "mean of signs");
    const double lr = 0.01;
    const json alg = {{"name", "sign_sgd"}, {"lr", lr}, {"momentum", 0.9}, {"majority_vote", vote}};
    auto trace = run_steps(alg, 5, 12, 40);
    at::Tensor previous = at::zeros({41});
    for (const auto& step : trace.steps) {
      at::Tensor sum = at::zeros({41});
      for (const auto& r : step) sum += wire_sign(r.grads);
      const auto expected = vote ? at::sign(sum) : sum / 5.0;
      if (vote) { EXPECT_EQ((expected == 0).sum().item<std::int64_t>(), 0); }
      for (const auto& r : step) {
        EXPECT_LE(max_abs_diff(r.params, previous - lr * expected), 1e-7);
        EXPECT_EQ(r.n_bits, 64u);  // ceil(41 / 32) words
      }
      previous = step[0].params;
    }
    const auto& last = dynamic_cast<algorithms::SignSgd&>(*trace.algorithms[0]).update();
    at::Tensor sum = at::zeros({41});
    for (const auto& r : trace.steps.back()) sum += wire_sign(r.grads);
    EXPECT_TRUE(at::equal(last, vote ? at::sign(sum) : sum / 5.0));
  }
}

// With an even number of ranks a tie gives 0.
TEST(SignSgd, MajorityVoteTieGivesZero) {
  auto trace = run_steps({{"name", "sign_sgd"}, {"lr", 0.01}}, 2, 6, 40);
  std::int64_t zeros = 0;
  for (std::size_t t = 1; t < trace.steps.size(); ++t) {
    const auto& step = trace.steps[t];
    const auto moved = step[0].params - trace.steps[t - 1][0].params;
    const auto tie = wire_sign(step[0].grads) != wire_sign(step[1].grads);
    EXPECT_EQ(moved.masked_select(tie).abs().sum().item<double>(), 0.0);
    zeros += tie.sum().item<std::int64_t>();
  }
  EXPECT_GT(zeros, 0);
}

// EF-sign SGD: c + e' = d + e on every rank and step (to fp32 rounding), c is the scaled
// sign (||p_l||_1 / numel_l) sign(p_l); the update is the mean of the decoded messages;
// n_bits = 32 ceil(d/32) + 32 L.
TEST(EfSignSgd, MemoryInvariantAndUpdate) {
  std::vector<at::Tensor> e_old(4), x_old(4);
  std::vector<at::Tensor> sent(4);
  double worst = 0.0;
  Hook hook = [&](int rank, std::int64_t, algorithms::Algorithm& alg, bool after, const std::vector<at::Tensor>& params,
                  const std::vector<at::Tensor>& grads) {
    auto& a = dynamic_cast<algorithms::EfSignSgd&>(alg);
    if (!after) {
      e_old[rank] = a.memory().defined() ? a.memory().clone() : at::zeros({41});
      x_old[rank] = flat(params);
      return;
    }
    sent[rank] = at::zeros({41});
    a.compressor().decompress(a.sent(), sent[rank]);
    const auto p = flat(grads) + e_old[rank];
    worst = std::max(worst, max_abs_diff(sent[rank] + a.memory(), p) / p.abs().max().item<double>());
    const auto w = p.narrow(0, 0, 40);
    EXPECT_LE(max_abs_diff(sent[rank].narrow(0, 0, 40), w.abs().mean() * wire_sign(w)), 1e-6);
  };
  const double lr = 0.1;
  auto trace = run_steps({{"name", "ef_sign_sgd"}, {"lr", lr}}, 4, 10, 40, hook);
  EXPECT_LE(worst, 1e-6);
  for (const auto& step : trace.steps)
    for (const auto& r : step) EXPECT_EQ(r.n_bits, 64u + 64u);
  // The last step's update: the mean of the four decoded messages.
  const auto mean = (sent[0] + sent[1] + sent[2] + sent[3]) / 4.0;
  for (int r = 0; r < 4; ++r) EXPECT_LE(max_abs_diff(trace.steps.back()[r].params, x_old[r] - lr * mean), 1e-6);
}

// ---------------------------------------------------------------------------------------
// Whole runs: phase names say which exchange ran; convergence on 8 ranks.

runner::RunResult run(const json& algorithm, int steps, int ranks = 8, int features = 32) {
  json doc = scenario_doc(algorithm, ranks, steps, features, "ring");
  doc["workload"]["samples"] = 4096;
  doc["workload"]["batch_size"] = 32;
  return runner::run_emulated(runner::parse_scenario(doc));
}

TEST(CentralizedLocalRuns, LocalEfSignSgdNamesItsExchange) {
  const json alg = {{"name", "local_ef_sign_sgd"}, {"lr", 0.1}, {"local_steps", 2}};
  auto fp32 = run(with(alg, {{"packed_signs", false}}), 4, 4);
  auto packed = run(with(alg, {{"packed_signs", true}}), 4, 4);
  auto has = [](const runner::RunResult& r, const std::string& name) {
    return std::find(r.phase_names.begin(), r.phase_names.end(), name) != r.phase_names.end();
  };
  EXPECT_TRUE(has(fp32, "sync/directions"));
  EXPECT_FALSE(has(fp32, "sync/directions_1bit"));
  EXPECT_TRUE(has(packed, "sync/directions_1bit"));
  EXPECT_FALSE(has(packed, "sync/directions"));
  // d = 33, L = 2: 32 d + 32 L versus 32 ceil(d / 32) + 32 L on the sync steps 2 and 4.
  EXPECT_EQ(fp32.n_bits, (std::vector<double>{0, 32 * 35, 0, 32 * 35}));
  EXPECT_EQ(packed.n_bits, (std::vector<double>{0, 32 * 4, 0, 32 * 4}));
}

// The reference DGC's compression-ratio warm-up, through the whole run (the runner's
// epoch count): top-k 1 % after a warm-up of 2 epochs; of the default ratios kept (0.25,
// 0.0625, 0.015625, 0.004, 0.001) the three >= 0.01 share the warm-up, ending at epochs
// 2/3, 4/3 and 2. 8 ranks of 512 samples in batches of 32: 16 steps per epoch, step t at
// epoch t / 16, so steps 1-10 keep 25 %, 11-21 6.25 %, 22-31 1.5625 %, 32 on 1 %. With
// 200 features and a bias, k = max(1, floor(200 r)) + 1 and n_bits = 96 k.
TEST(SparsifiedSgd, CompressionRatioWarmUpFollowsTheReferenceSchedule) {
  const json alg = {{"name", "sparsified_sgd"},
                    {"lr", 0.3},
                    {"compress_warmup_epochs", 2},
                    {"compressor", {{"kind", "top_k"}, {"ratio", 0.01}}}};
  const auto r = run(alg, 40, 8, 200);
  auto expected_k = [](int t) {
    const double ratio = t <= 10 ? 0.25 : t <= 21 ? 0.0625 : t <= 31 ? 0.015625 : 0.01;
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(200 * ratio))) + 1;
  };
  ASSERT_EQ(r.n_bits.size(), 40u);
  for (int t = 1; t <= 40; ++t) EXPECT_EQ(r.n_bits[t - 1], 96.0 * static_cast<double>(expected_k(t))) << "step " << t;

  // Ratios of one's own, and random_k: those below the target are not used.
  const auto own = run(with(alg, {{"compress_warmup_ratios", {0.5, 0.005}},
                                  {"compressor", {{"kind", "random_k"}, {"ratio", 0.01}}}}),
                       40, 8, 200);
  for (int t = 1; t <= 40; ++t) EXPECT_EQ(own.n_bits[t - 1], 96.0 * (t < 32 ? 100 + 1 : 2 + 1)) << "step " << t;

  // Refused at load or before the run, at the field: a kind without a ratio, ratios not
  // decreasing or out of (0, 1], a workload without data to count epochs in.
  auto error_path = [](const json& doc) {
    try {
      runner::run_emulated(runner::parse_scenario(doc));
    } catch (const runner::ScenarioError& e) {
      return e.path();
    }
    return std::string("accepted");
  };
  json doc = scenario_doc(with(alg, {{"compressor", {{"kind", "qsgd"}}}}), 4, 2, 8);
  EXPECT_EQ(error_path(doc), "/algorithm/compress_warmup_epochs");
  doc = scenario_doc(with(alg, {{"compress_warmup_ratios", {0.1, 0.2}}}), 4, 2, 8);
  EXPECT_EQ(error_path(doc), "/algorithm/compress_warmup_ratios/1");
  doc = scenario_doc(with(alg, {{"compress_warmup_ratios", {1.5}}}), 4, 2, 8);
  EXPECT_EQ(error_path(doc), "/algorithm/compress_warmup_ratios/0");
  doc = scenario_doc(alg, 4, 2, 8);
  doc["workload"] = {{"type", "resnet20"}};
  EXPECT_EQ(error_path(doc), "/algorithm/compress_warmup_epochs");
}

// The example scenarios parse; post-local SGD (H = 16 from step 100) syncs on steps 1..99
// and every 16th step after, 32 d bits each (d = 65).
TEST(CentralizedLocalRuns, ExampleScenarios) {
  const std::filesystem::path dir = std::filesystem::path(DTSIM_SOURCE_DIR) / "scenarios";
  const std::vector<std::string> names{"sparsified_sgd", "sign_sgd",       "ef_sign_sgd",      "local_sgd",
                                       "post_local_sgd", "local_sign_sgd", "local_ef_sign_sgd"};
  for (const auto& name : names) EXPECT_EQ(runner::load_scenario(dir / (name + ".json")).name, name);
  auto s = runner::load_scenario(dir / "post_local_sgd.json");
  EXPECT_EQ(algorithms::settings_of<algorithms::LocalSchedule>(s.algorithm).local_steps, 16);
  s.steps = 130;
  auto r = runner::run_emulated(s);
  for (std::int64_t t = 1; t <= 130; ++t)
    EXPECT_EQ(r.n_bits[t - 1], t < 100 || t % 16 == 0 ? 32 * 65 : 0) << "step " << t;
}

// The convergence table in algorithms/README.md (8 ranks, 4096 samples, 32 features,
// batch 32 per rank, ring network): the key rows.
TEST(CentralizedLocalConvergence, EightRanksReachTheTableLosses) {
  auto parallel = run({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.5}}, 150);
  auto local = run({{"name", "local_sgd"}, {"lr", 0.5}, {"local_steps", 8}}, 150);
  auto post_local = run({{"name", "local_sgd"}, {"lr", 0.5}, {"local_steps", 16}, {"turn_on_local_steps_from", 50}}, 150);
  auto sparse = run({{"name", "sparsified_sgd"}, {"lr", 0.5}, {"compressor", {{"kind", "top_k"}, {"ratio", 0.1}}}}, 150);
  auto ef = run({{"name", "ef_sign_sgd"}, {"lr", 0.3}}, 150);
  auto sign = run({{"name", "sign_sgd"}, {"lr", 0.01}}, 150);
  auto local_ef = run({{"name", "local_ef_sign_sgd"}, {"lr", 0.5}, {"local_steps", 4}, {"packed_signs", true}}, 150);
  for (const auto* r : {&parallel, &local, &post_local, &sparse, &ef, &local_ef}) {
    EXPECT_LT(r->final_loss, 0.365) << r->scenario.algorithm.name;
    EXPECT_GT(r->final_accuracy, 0.83) << r->scenario.algorithm.name;
  }
  EXPECT_LT(sign.final_loss, 0.37);
  EXPECT_GT(sign.final_accuracy, 0.825);
  // Local SGD with H = 8 sends 32 d on 18 of the 150 steps; post-local SGD on steps 1..49
  // and every 16th after (3 more); top-k 10%: 96 k with k = 3 + 1.
  EXPECT_DOUBLE_EQ(std::accumulate(local.n_bits.begin(), local.n_bits.end(), 0.0), 18 * 32 * 33);
  EXPECT_DOUBLE_EQ(std::accumulate(post_local.n_bits.begin(), post_local.n_bits.end(), 0.0), (49 + 6) * 32 * 33);
  EXPECT_DOUBLE_EQ(sparse.mean_n_bits(), 96 * 4);
}

// Same budget (200 steps, 8 ranks, 128 features), each at its best learning rate of a
// grid: error feedback beats plain sign SGD (majority vote, no memory).
TEST(CentralizedLocalConvergence, EfSignSgdBeatsSignSgdWithoutMemory) {
  auto ef = run({{"name", "ef_sign_sgd"}, {"lr", 0.3}}, 200, 8, 128);
  double best_sign = 1e9;
  for (double lr : {0.03, 0.01, 0.003})
    best_sign = std::min(best_sign, run({{"name", "sign_sgd"}, {"lr", lr}}, 200, 8, 128).final_loss);
  EXPECT_LT(ef.final_loss, best_sign - 0.003) << ef.final_loss << " vs " << best_sign;
}

}  // namespace
}  // namespace dtsim
