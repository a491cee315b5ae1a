// DiLoCo, Streaming DiLoCo, SparseLoCo (issue 48) and data-parallel AdamW on emulated ranks of logistic
// regression: their relations to AdamW, the bits of every outer step in closed form, the
// fragment schedule, SparseLoCo's error-feedback invariant, one-line scenario errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "algorithms/diloco.hpp"
#include "algorithms/optimizers/optimizer.hpp"
#include "algorithms/sparseloco.hpp"
#include "algorithms/streaming_diloco.hpp"
#include "comm/emulated.hpp"
#include "comm/phase_timer.hpp"
#include "config/scenario_error.hpp"
#include "kernels/llm_codecs.hpp"
#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"
#include "runner/run.hpp"
#include "sim/engine.hpp"
#include "workloads/logistic_regression.hpp"

namespace dtsim {
namespace {

using nlohmann::json;

json scenario_doc(const json& algorithm, int ranks, int steps, int features) {
  return {{"name", "t"},
          {"ranks", ranks},
          {"steps", steps},
          {"seed", 5},
          {"workload", {{"kind", "logistic_regression"}, {"samples", 1024}, {"features", features}, {"batch_size", 16}}},
          {"algorithm", algorithm},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 2}, {"bandwidth_GBps", 1}}}};
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.clone());
  return out;
}

// What one rank had after one step.
struct Record {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> grads;  // the step's gradients (copied before the step)
  std::uint64_t n_bits = 0;
};

// Called on every rank before (after = false) and after each step.
using Hook = std::function<void(int rank, std::int64_t t, algorithms::Algorithm&, bool after)>;

struct Trace {
  std::vector<std::vector<Record>> steps;  // [t - 1][rank]
  std::vector<std::unique_ptr<algorithms::Algorithm>> algorithms;
  std::vector<at::Tensor> initial;
};

sim::Task<void> rank_loop(comm::Communicator& comm, const runner::Scenario& s,
                          std::shared_ptr<const workloads::SyntheticDataset> data, Trace& trace, const Hook& hook) {
  const int rank = comm.rank();
  auto workload = workloads::make_logistic_regression(workloads::settings_of<workloads::LogisticRegressionSpec>(s.workload), data, s.seed, rank, s.ranks);
  auto& algorithm = *trace.algorithms[rank];
  auto params = workload->initial_parameters();
  if (rank == 0) trace.initial = clones(params);
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(at::zeros_like(p));
  comm::PhaseTimer timer(comm);
  for (std::int64_t t = 1; t <= s.steps; ++t) {
    co_await comm.compute(workload->backward_cost(), [&] {
      workload->forward(params);
      workload->backward(params, grads);
    });
    auto& record = trace.steps[t - 1][rank];
    record.grads = clones(grads);
    if (hook) hook(rank, t, algorithm, false);
    algorithms::StepContext ctx{comm, timer, params, grads, t, s.algorithm.optimizer.lr};
    record.n_bits = co_await algorithm.step(ctx);
    if (hook) hook(rank, t, algorithm, true);
    record.params = clones(params);
    timer.take_step();
  }
  co_await algorithm.finish(comm);
}

Trace run_steps(const json& algorithm, int ranks, int steps, int features = 8, const Hook& hook = {}) {
  const auto s = runner::parse_scenario(scenario_doc(algorithm, ranks, steps, features));
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

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes() && at::equal(a, b); }

void expect_bitwise(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(bitwise_equal(a[i], b[i])) << what << ", tensor " << i << ": max |diff| "
                                           << (a[i] - b[i]).abs().max().item<double>();
}

algorithms::optimizers::OptimizerConfig default_adamw() {
  return {.name = "adamw", .weight_decay = 0.01};
}

json diloco_h1(double lr) {
  return {{"name", "diloco"},
          {"lr", lr},
          {"local_steps", 1},
          {"outer_optimizer", {{"name", "sgd"}, {"momentum", 0.0}}},
          {"outer_lr", 1.0}};
}

// DiLoCo with H = 1 and an outer SGD of lr 1 without momentum is theta <- theta - (1/R)
// sum_r (theta - A_r(theta)), A_r rank r's AdamW step (its own moments). One rank: that is
// plain AdamW up to the rounding of theta - (theta - A(theta)), which is exact wherever
// Sterbenz's lemma applies (A(theta) within a factor 2 of theta) and one rounding of the
// subtraction elsewhere (a weight crossing zero). So bit for bit against that form, and
// within that subtraction's two roundings (2^-22 relative to the larger of theta and
// A(theta)) against AdamW from the same point and state. Data-parallel AdamW (the gradients averaged, one set of moments) equals it
// only where the ranks' gradients agree, AdamW not being linear in g: with several ranks the
// test below holds the rank-wise form bit for bit instead.
TEST(Diloco, OneRankH1IsAdamWUpToTheOuterSubtraction) {
  const auto trace = run_steps(diloco_h1(0.05), 1, 12);
  auto adamw = algorithms::optimizers::make_optimizer(default_adamw());
  auto theta = clones(trace.initial);
  std::int64_t exact = 0, total = 0;
  for (std::size_t t = 0; t < trace.steps.size(); ++t) {
    const auto& rec = trace.steps[t][0];
    auto a = clones(theta);
    adamw->step(a, rec.grads, 0.05);  // AdamW from theta with the run's gradients
    std::vector<at::Tensor> expected;
    for (std::size_t i = 0; i < theta.size(); ++i) expected.push_back(theta[i].add(theta[i] - a[i], -1.0));
    expect_bitwise(rec.params, expected, "step " + std::to_string(t + 1));
    for (std::size_t i = 0; i < theta.size(); ++i) {
      // |fl(theta - fl(theta - a)) - a| <= u |theta - a| + u |a| (1 + u) <= 3 u M (1 + u),
      // u = 2^-24, M = max(|theta|, |a|): within 2^-22 M.
      const auto bound = at::maximum(a[i].abs(), theta[i].abs()) * std::ldexp(1.0, -22);
      const auto bad = ((rec.params[i] - a[i]).abs() > bound).nonzero();
      EXPECT_EQ(bad.numel(), 0) << "step " << t + 1 << " theta " << theta[i].index({bad}) << " a " << a[i].index({bad}) << " got " << rec.params[i].index({bad});
      exact += at::eq(rec.params[i], a[i]).sum().item<std::int64_t>();
      total += a[i].numel();
    }
    theta = clones(rec.params);
  }
  EXPECT_GT(exact, total * 3 / 4) << "most elements are AdamW's bits exactly";
}

TEST(Diloco, H1AveragesEveryRanksAdamWStepBitForBit) {
  const int R = 4;
  const auto trace = run_steps(diloco_h1(0.05), R, 10);
  std::vector<std::unique_ptr<algorithms::optimizers::Optimizer>> adamw;
  for (int r = 0; r < R; ++r) adamw.push_back(algorithms::optimizers::make_optimizer(default_adamw()));
  auto theta = clones(trace.initial);
  for (std::size_t t = 0; t < trace.steps.size(); ++t) {
    std::vector<at::Tensor> sum;
    for (int r = 0; r < R; ++r) {
      auto a = clones(theta);
      adamw[r]->step(a, trace.steps[t][r].grads, 0.05);
      for (std::size_t i = 0; i < theta.size(); ++i) {
        const auto delta = theta[i] - a[i];
        if (r == 0) sum.push_back(delta.clone());
        else sum[i].add_(delta);  // the all-reduce's sum, in rank order
      }
    }
    for (std::size_t i = 0; i < theta.size(); ++i) theta[i].add_(sum[i].div(R), -1.0);
    for (int r = 0; r < R; ++r) expect_bitwise(trace.steps[t][r].params, theta, "step " + std::to_string(t + 1));
  }
}

// n_bits of every step: 0 on inner steps, on the outer steps (t mod H = 0) fp32 32 d, bf16
// 16 d, int8 8 n + 8192 per tensor, fp4 4 n + 32 ceil(n / B) per tensor plus 4 for an odd n.
TEST(Diloco, BitsPerOuterStepForEveryCodec) {
  const int H = 3;
  for (const std::string codec : {"none", "bf16", "int8", "fp4"}) {
    json a = {{"name", "diloco"}, {"lr", 0.01}, {"local_steps", H}, {"outer_codec", codec}};
    if (codec == "fp4") a["fp4_block"] = 4;
    const auto trace = run_steps(a, 4, 7, 9);  // weight [9] (odd), bias [1]
    std::uint64_t expected = 0;
    for (const auto& p : trace.initial) {
      const auto n = static_cast<std::uint64_t>(p.numel());
      if (codec == "none") expected += 32 * n;
      if (codec == "bf16") expected += 16 * n;
      if (codec == "int8") expected += 8 * n + 8192;
      if (codec == "fp4") expected += 4 * n + 32 * ((n + 3) / 4) + (n % 2 ? 4 : 0);
    }
    for (std::size_t t = 0; t < trace.steps.size(); ++t)
      for (int r = 0; r < 4; ++r) {
        const bool outer = (t + 1) % H == 0;
        EXPECT_EQ(trace.steps[t][r].n_bits, outer ? expected : 0) << codec << " step " << t + 1;
        if (outer) expect_bitwise(trace.steps[t][r].params, trace.steps[t][0].params, codec + ": replicas equal");
      }
  }
}

// A lossy codec changes the outer step, and only it: bf16 Delta = mean of the bf16-rounded
// Delta_r, decoded and summed in fp32; int8 and fp4 land close to the fp32 run.
TEST(Diloco, CodecsStayCloseToFp32) {
  auto run = [](const std::string& codec) {
    return run_steps({{"name", "diloco"}, {"lr", 0.02}, {"local_steps", 4}, {"outer_codec", codec}}, 4, 16, 16);
  };
  const auto fp32 = run("none");
  for (const std::string codec : {"bf16", "int8", "fp4"}) {
    const auto lossy = run(codec);
    const auto& a = fp32.steps.back()[0].params;
    const auto& b = lossy.steps.back()[0].params;
    const double scale = a[0].abs().max().item<double>();
    EXPECT_GT(scale, 0.0);
    EXPECT_LT((a[0] - b[0]).abs().max().item<double>(), (codec == "fp4" ? 0.3 : 0.05) * scale) << codec;
    EXPECT_FALSE(bitwise_equal(a[0], b[0])) << codec << " is lossy";
  }
}

// The averaged outer gradient is the fp32 mean, in rank order, of what each codec's kernel
// decodes from Delta_r = x_0 - theta_r(H): the messages' layouts lose nothing on the way.
// theta_r(H) is a run without outer steps (H = 100).
TEST(Diloco, OuterGradientIsTheMeanOfTheDecodedMessages) {
  namespace llm = kernels::llm;
  const int R = 4, H = 3;
  const auto no_sync = run_steps({{"name", "diloco"}, {"lr", 0.02}, {"local_steps", 100}}, R, H, 300);
  for (const std::string codec : {"none", "bf16", "int8", "fp4"}) {
    const auto trace = run_steps({{"name", "diloco"}, {"lr", 0.02}, {"local_steps", H}, {"outer_codec", codec}}, R, H, 300);
    const auto& got = dynamic_cast<algorithms::Diloco&>(*trace.algorithms[1]).outer_gradient();
    for (std::size_t i = 0; i < trace.initial.size(); ++i) {
      at::Tensor sum;
      for (int r = 0; r < R; ++r) {
        const auto delta = (trace.initial[i] - no_sync.steps[H - 1][r].params[i]).reshape({-1}).contiguous();
        at::Tensor decoded = at::empty_like(delta);
        if (codec == "none") decoded = delta;
        if (codec == "bf16") decoded = delta.to(at::kBFloat16).to(at::kFloat);
        if (codec == "int8") llm::int8_decode(llm::int8_encode(delta), decoded);
        if (codec == "fp4") llm::fp4_decode(llm::fp4_encode(delta, 256), decoded);
        if (r == 0) sum = decoded.clone();
        else sum.add_(decoded);
      }
      sum.div_(R);
      EXPECT_TRUE(bitwise_equal(got[i].reshape({-1}), sum)) << codec << " tensor " << i;
    }
  }
}

// Streaming DiLoCo's schedule: fragment p starts its exchange at t mod H = floor(p H / P).
TEST(StreamingDiloco, FragmentScheduleClosedForm) {
  const std::int64_t H = 12, P = 3;
  for (std::int64_t t = 1; t <= 40; ++t) {
    const auto p = algorithms::streaming_fragment_at(t, H, P);
    const std::int64_t expected = t % H == 0 ? 0 : t % H == 4 ? 1 : t % H == 8 ? 2 : -1;
    EXPECT_EQ(p, expected) << "t " << t;
  }
  EXPECT_EQ(algorithms::streaming_fragment_at(5, 10, 2), 1);  // offset floor(1 * 10 / 2) = 5
  EXPECT_EQ(algorithms::streaming_fragment_at(3, 10, 3), 1);  // floor(10 / 3) = 3
  EXPECT_EQ(algorithms::streaming_fragment_at(6, 10, 3), 2);  // floor(20 / 3) = 6
}

// Strided blocks: nanoGPT's names, 4 blocks in 2 fragments; embeddings with block 0, the final
// LayerNorm with block 3; without blocks, strided tensors.
TEST(StreamingDiloco, StridedFragmentsOfBlocks) {
  std::vector<std::string> names{"transformer.wte.weight", "transformer.wpe.weight"};
  for (int l = 0; l < 4; ++l)
    for (const char* t : {"ln_1.weight", "attn.c_attn.weight", "mlp.c_proj.bias"})
      names.push_back(fmt::format("transformer.h.{}.{}", l, t));
  names.push_back("transformer.ln_f.weight");
  names.push_back("transformer.ln_f.bias");
  const auto f = algorithms::streaming_fragments(names, names.size(), 2);
  ASSERT_EQ(f.size(), 2u);
  const std::vector<std::size_t> f0{0, 1, 2, 3, 4, 8, 9, 10};
  const std::vector<std::size_t> f1{5, 6, 7, 11, 12, 13, 14, 15};
  EXPECT_EQ(f[0], f0);
  EXPECT_EQ(f[1], f1);
  EXPECT_THROW(algorithms::streaming_fragments(names, names.size(), 5), std::invalid_argument);  // 4 blocks
  const auto strided = algorithms::streaming_fragments({"a", "b", "c", "d", "e"}, 5, 2);
  EXPECT_EQ(strided[0], (std::vector<std::size_t>{0, 2, 4}));
  EXPECT_EQ(strided[1], (std::vector<std::size_t>{1, 3}));
  EXPECT_THROW(algorithms::streaming_fragments({"a", "b"}, 2, 3), std::invalid_argument);
}

// One fragment, no overlap, alpha 0 is DiLoCo, bit for bit (same codec).
TEST(StreamingDiloco, OneFragmentWithoutOverlapIsDiloco) {
  for (const std::string codec : {"none", "fp4"}) {
    const json common = {{"lr", 0.02}, {"local_steps", 3}, {"outer_codec", codec}};
    json d = common, s = common;
    d["name"] = "diloco";
    s["name"] = "streaming_diloco";
    s["fragments"] = 1;
    s["overlap_steps"] = 0;
    s["mixing"] = 0.0;
    const auto a = run_steps(d, 4, 9);
    const auto b = run_steps(s, 4, 9);
    for (std::size_t t = 0; t < a.steps.size(); ++t)
      for (int r = 0; r < 4; ++r) {
        expect_bitwise(a.steps[t][r].params, b.steps[t][r].params, codec + " step " + std::to_string(t + 1));
        EXPECT_EQ(a.steps[t][r].n_bits, b.steps[t][r].n_bits);
      }
  }
}

// Two fragments (strided tensors: weight, bias) every H = 4 steps at offsets 0 and 2: each
// start sends that fragment's FP4 message; the merge after tau = 1 step mixes in alpha.
TEST(StreamingDiloco, StaggeredFragmentsSendTheirOwnBits) {
  const json a = {{"name", "streaming_diloco"}, {"lr", 0.02}, {"local_steps", 4}, {"fragments", 2},
                  {"overlap_steps", 1}, {"mixing", 0.5}, {"fp4_block", 0}};
  const auto trace = run_steps(a, 4, 12, 9);
  const std::uint64_t weight_bits = 4 * 9 + 4 + 32, bias_bits = 4 * 1 + 4 + 32;
  for (std::size_t t = 0; t < trace.steps.size(); ++t) {
    const auto step = static_cast<std::int64_t>(t + 1);
    const std::uint64_t expected = step % 4 == 0 ? weight_bits : step % 4 == 2 ? bias_bits : 0;
    EXPECT_EQ(trace.steps[t][0].n_bits, expected) << "step " << step;
  }
}

// The overlap and the merge, at the first outer step (H = 3, one fragment): the exchange
// started at t = 3 carries Delta from the ranks' theta_r(3), the rank keeps training tau
// steps untouched, and at t = 3 + tau its parameters become alpha theta_r(3 + tau) +
// (1 - alpha) theta', theta' DiLoCo's global model after its first outer step. theta_r(t)
// is a run without outer steps (H = 100), theta' DiLoCo's own at t = 3.
TEST(StreamingDiloco, OverlapThenMergeWithAlpha) {
  const double alpha = 0.25;
  const int R = 4;
  const json inner = {{"lr", 0.02}, {"outer_codec", "none"}};
  json d = inner, local = inner;
  d["name"] = local["name"] = "diloco";
  d["local_steps"] = 3;
  local["local_steps"] = 100;
  const auto diloco = run_steps(d, R, 4);
  const auto no_sync = run_steps(local, R, 4);
  for (const int tau : {0, 1}) {
    json s = inner;
    s["name"] = "streaming_diloco";
    s["local_steps"] = 3;
    s["fragments"] = 1;
    s["overlap_steps"] = tau;
    s["mixing"] = alpha;
    const auto streaming = run_steps(s, R, 4);
    const std::size_t join = 2 + static_cast<std::size_t>(tau);  // step 3 + tau, 0-based
    for (int r = 0; r < R; ++r) {
      std::vector<at::Tensor> expected;
      for (std::size_t i = 0; i < diloco.initial.size(); ++i)
        expected.push_back(no_sync.steps[join][r].params[i].mul(alpha).add(diloco.steps[2][r].params[i], 1.0 - alpha));
      expect_bitwise(streaming.steps[join][r].params, expected, "tau " + std::to_string(tau) + " rank " + std::to_string(r));
      if (tau == 1)  // the step between start and join leaves the rank's training alone
        expect_bitwise(streaming.steps[2][r].params, no_sync.steps[2][r].params, "before the join");
    }
  }
}

// SparseLoCo's error feedback, element for element at every outer step: e_r(after) =
// beta e_r(before) + Delta_r - Delta_hat_r, the same fp32 operations; Delta_hat_r keeps at
// most k values per chunk (each tensor here is one chunk), each one of +-M, +-M/3; theta moves by -alpha times the rank-order
// mean of the Delta_hat_r; n_bits in closed form.
TEST(SparseLoco, ErrorFeedbackInvariantAndUpdate) {
  const int R = 4, H = 2;
  const double beta = 0.9, alpha = 0.8;
  const json a = {{"name", "sparseloco"}, {"lr", 0.02}, {"local_steps", H}, {"error_decay", beta},
                  {"outer_lr", alpha}, {"density", 0.05}};
  std::vector<std::vector<at::Tensor>> e_before(R), theta_before(R);
  std::vector<std::vector<std::vector<at::Tensor>>> sent(6, std::vector<std::vector<at::Tensor>>(R));  // [t - 1][rank]
  int checked = 0;
  Hook hook = [&](int r, std::int64_t t, algorithms::Algorithm& alg, bool after) {
    auto& s = dynamic_cast<algorithms::SparseLoco&>(alg);
    if (t % H != 0) return;
    if (!after) {
      e_before[r] = s.error().empty() ? std::vector<at::Tensor>{} : clones(s.error());
      theta_before[r] = s.global().empty() ? std::vector<at::Tensor>{} : clones(s.global());
      return;
    }
    sent[t - 1][r] = clones(s.sent());
    for (std::size_t i = 0; i < s.error().size(); ++i) {
      const auto before = e_before[r].empty() ? at::zeros_like(s.error()[i]) : e_before[r][i];
      const auto expected = before.mul(beta).add(s.delta()[i]).sub(s.sent()[i]);
      EXPECT_TRUE(bitwise_equal(s.error()[i], expected)) << "rank " << r << " step " << t << " tensor " << i;
      const auto& sent_i = s.sent()[i];
      const double M = sent_i.abs().max().item<double>();
      const auto nonzero = sent_i.ne(0);
      const auto levels = sent_i.abs().masked_select(nonzero);
      const float third = static_cast<float>(M) * (1.0f / 3.0f);  // two_bit_value's level
      EXPECT_TRUE(at::all(levels.eq(static_cast<float>(M)).logical_or(levels.eq(third))).item<bool>());
      ++checked;
    }
  };
  const auto trace = run_steps(a, R, 6, 300, hook);  // weight [300]: one chunk, k = 15; bias [1]: k = 1
  EXPECT_EQ(checked, R * 3 * 2);
  for (std::size_t t = 0; t < trace.steps.size(); ++t)
    for (int r = 0; r < R; ++r) {
      const bool outer = (t + 1) % H == 0;
      // [300]: 1 chunk of 300 (9 index bits), k 15; [1]: 1 chunk of 1 (1 index bit), k 1.
      const std::uint64_t expected = (15 * (2 + 9) + 32) + (1 * (2 + 1) + 32);
      EXPECT_EQ(trace.steps[t][r].n_bits, outer ? expected : 0);
      if (outer) {
        EXPECT_LE(sent[t][r][0].ne(0).sum().item<std::int64_t>(), 15);
      }
    }
  // The update at the last outer step (t = 6) from rank 0's theta before it: the decoded
  // messages summed in rank order, / R, times -alpha.
  auto& alg = dynamic_cast<algorithms::SparseLoco&>(*trace.algorithms[0]);
  for (std::size_t i = 0; i < alg.global().size(); ++i) {
    auto mean = sent[5][0][i].clone();
    for (int r = 1; r < R; ++r) mean.add_(sent[5][r][i]);
    mean.div_(R);
    EXPECT_TRUE(bitwise_equal(alg.global()[i], theta_before[0][i].add(mean, -alpha))) << "tensor " << i;
    for (int r = 0; r < R; ++r) EXPECT_TRUE(bitwise_equal(trace.steps[5][r].params[i], alg.global()[i]));
  }
  EXPECT_GT(alg.state_bytes(), 0u);
}

// Centralized parallel SGD with an AdamW optimizer object is data-parallel AdamW: every rank
// applies AdamW (one set of moments per rank, all equal) to the all-reduced average of the
// ranks' gradients, summed in rank order. So every rank's parameters are, bit for bit,
// those of one AdamW fed with that average.
TEST(ParallelSgd, AdamWObjectIsDataParallelAdamW) {
  constexpr int ranks = 4, steps = 10;
  const auto trace = run_steps({{"name", "parallel_sgd"},
                                {"variant", "centralized"},
                                {"lr", 0.01},
                                {"optimizer", {{"name", "adamw"}, {"weight_decay", 0.01}}}},
                               ranks, steps);
  auto adamw = algorithms::optimizers::make_optimizer(default_adamw());
  auto theta = clones(trace.initial);
  for (int t = 1; t <= steps; ++t) {
    const auto& step = trace.steps[t - 1];
    std::vector<at::Tensor> mean;
    for (std::size_t i = 0; i < theta.size(); ++i) {
      auto sum = step[0].grads[i].clone();
      for (int r = 1; r < ranks; ++r) sum.add_(step[r].grads[i]);
      mean.push_back(sum.div_(ranks));
    }
    adamw->step(theta, mean, 0.01);
    for (int r = 0; r < ranks; ++r) expect_bitwise(step[r].params, theta, fmt::format("step {} rank {}", t, r));
    EXPECT_EQ(step[0].n_bits, 32u * static_cast<std::uint64_t>(theta[0].numel() + theta[1].numel()));
  }
  // Not SGD: the same run without the object takes other steps.
  const auto sgd = run_steps({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.01}}, ranks, 2);
  EXPECT_FALSE(bitwise_equal(sgd.steps[1][0].params[0], trace.steps[1][0].params[0]));
  // Its moments are its state: two fp32 tensors per parameter, on every rank.
  EXPECT_EQ(trace.algorithms[0]->state_bytes(), adamw->state_bytes());
}

// Bad settings: one line naming the JSON path.
TEST(LlmAlgorithms, ScenarioErrorsNameThePath) {
  auto error_at = [](json algorithm) {
    try {
      runner::parse_scenario(scenario_doc(algorithm, 2, 2, 4));
    } catch (const config::ScenarioError& e) {
      return e.path();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(error_at({{"name", "diloco"}, {"lr", 0.1}, {"local_steps", 0}}), "/algorithm/local_steps");
  EXPECT_EQ(error_at({{"name", "diloco"}, {"lr", 0.1}, {"outer_codec", "fp8"}}), "/algorithm/outer_codec");
  EXPECT_EQ(error_at({{"name", "diloco"}, {"lr", 0.1}, {"fp4_block", 16}}), "/algorithm/fp4_block");
  EXPECT_EQ(error_at({{"name", "diloco"}, {"lr", 0.1}, {"momentum", 0.9}}), "/algorithm/momentum");
  EXPECT_EQ(error_at({{"name", "diloco"}, {"lr", 0.1}, {"inner_optimizer", {{"name", "adamw"}, {"momentum", 0.9}}}}),
            "/algorithm/inner_optimizer/momentum");
  EXPECT_EQ(error_at({{"name", "diloco"}, {"lr", 0.1}, {"outer_lr", 0}}), "/algorithm/outer_lr");
  EXPECT_EQ(error_at({{"name", "streaming_diloco"}, {"lr", 0.1}, {"mixing", 1.5}}), "/algorithm/mixing");
  EXPECT_EQ(error_at({{"name", "streaming_diloco"}, {"lr", 0.1}, {"local_steps", 4}, {"fragments", 5}}),
            "/algorithm/fragments");
  EXPECT_EQ(error_at({{"name", "streaming_diloco"}, {"lr", 0.1}, {"local_steps", 8}, {"fragments", 4},
                      {"overlap_steps", 3}}),
            "/algorithm/overlap_steps");
  EXPECT_EQ(error_at({{"name", "sparseloco"}, {"lr", 0.1}, {"error_decay", -0.1}}), "/algorithm/error_decay");
  EXPECT_EQ(error_at({{"name", "sparseloco"}, {"lr", 0.1}, {"chunk", 65}}), "/algorithm/chunk");
  EXPECT_EQ(error_at({{"name", "sparseloco"}, {"lr", 0.1}, {"outer_codec", "fp4"}}), "/algorithm/outer_codec");
  // An optimizer object replaces the algorithm-level SGD fields.
  EXPECT_EQ(error_at({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}, {"momentum", 0.9},
                      {"optimizer", {{"name", "adamw"}}}}),
            "/algorithm/momentum");
  EXPECT_EQ(error_at({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1},
                      {"optimizer", {{"name", "adamw"}, {"beta1", 1.5}}}}),
            "/algorithm/optimizer/beta1");
  EXPECT_EQ(error_at({{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.1},
                      {"optimizer", {{"name", "lion"}}}}),
            "/algorithm/optimizer/name");
}

// More fragments than the model has transformer blocks: a scenario error at /algorithm/fragments
// when the run builds its ranks.
TEST(LlmAlgorithms, MoreFragmentsThanBlocksIsAScenarioError) {
  json doc = scenario_doc({{"name", "streaming_diloco"}, {"lr", 0.001}, {"local_steps", 4}, {"fragments", 3}}, 2, 4, 4);
  doc["workload"] = {{"type", "gpt"},   {"data", "text"},   {"layers", 2},          {"heads", 2},
                     {"width", 16},     {"context", 8},     {"batch_size", 2},      {"eval_windows", 2}};
  try {
    runner::run_emulated(runner::parse_scenario(doc));
    ADD_FAILURE() << "accepted";
  } catch (const config::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/algorithm/fragments");
    EXPECT_NE(std::string(e.what()).find("2 transformer blocks"), std::string::npos) << e.what();
  }
}

// The result's peak rate: the largest per-step n_bits / time and wire bytes / time.
TEST(LlmAlgorithms, PeakRateIsTheBusiestStep) {
  runner::RunResult r;
  r.step_time_s = {1.0, 0.5, 2.0};
  r.n_bits = {10.0, 20.0, 30.0};
  r.wire_bytes = {4.0, 1.0, 16.0};
  EXPECT_EQ(r.peak_n_bits_per_s(), 40.0);
  EXPECT_EQ(r.peak_wire_bytes_per_s(), 8.0);
}

}  // namespace
}  // namespace dtsim
