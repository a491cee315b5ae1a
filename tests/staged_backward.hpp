// The harness the DistOpt and DDP tests share: a test-local model whose backward pass
// produces its gradients in stages (so that algorithms which overlap communication with
// backward can be checked against closed forms), run on an emulated alpha-beta ring.
//
// The model: separable quadratic losses f_r,t(x) = sum_j 0.5 ||x_j - c_rtj||^2 with
// targets that differ per rank, step and tensor, so g_j = x_j - c_rtj; tensor j has a
// shape (PowerSGD views a tensor as a matrix), and backward stage k produces the tensors
// stages[k] at a cost of stage_flops[k].
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/algorithm.hpp"
#include "algorithms/registry.hpp"
#include "comm/emulated.hpp"
#include "comm/phase_timer.hpp"
#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"
#include "runner/scenario.hpp"
#include "sim/engine.hpp"

namespace dtsim::testing {

struct FakeModel {
  std::vector<std::vector<std::int64_t>> shapes;  // of each parameter tensor
  std::vector<std::vector<std::size_t>> stages;   // parameter indices per backward stage
  std::vector<double> stage_flops;                // compute cost of each stage
};

inline std::int64_t numel_of(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

// c_rtj, flattened.
inline at::Tensor target(int rank, std::int64_t t, std::size_t j, std::int64_t n) {
  return at::arange(n, at::kFloat)
      .mul(0.37 + 0.11 * static_cast<double>(j))
      .add(1.3 * rank + 0.7 * static_cast<double>(t) + 0.2 * static_cast<double>(j))
      .sin()
      .mul(1.5);
}

inline at::Tensor gradient(const at::Tensor& x, int rank, std::int64_t t, std::size_t j) {
  return x - target(rank, t, j, x.numel()).view(x.sizes());
}

inline std::vector<at::Tensor> initial_params(const FakeModel& m) {
  std::vector<at::Tensor> params;
  for (std::size_t j = 0; j < m.shapes.size(); ++j)
    params.push_back(at::arange(numel_of(m.shapes[j]), at::kFloat)
                         .mul(0.05)
                         .cos()
                         .mul(0.5 + 0.1 * static_cast<double>(j))
                         .view(m.shapes[j]));
  return params;
}

class FakeBackward final : public algorithms::BackwardPass {
 public:
  FakeBackward(comm::Communicator& comm, const FakeModel& m, std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads)
      : comm_(comm), m_(m), params_(params), grads_(grads) {}
  std::size_t stages() const override { return m_.stages.size(); }
  const std::vector<std::size_t>& stage_params(std::size_t k) const override { return m_.stages[k]; }
  sim::Task<void> run_stage(std::size_t k) override {
    co_await comm_.compute({m_.stage_flops[k], 0.0}, [&] {
      for (std::size_t j : m_.stages[k]) grads_[j].copy_(gradient(params_[j], comm_.rank(), t, j));
    });
  }
  std::int64_t t = 0;

 private:
  comm::Communicator& comm_;
  const FakeModel& m_;
  std::vector<at::Tensor>& params_;
  std::vector<at::Tensor>& grads_;
};

// What the steps left behind.
struct Trace {
  std::vector<std::vector<std::vector<at::Tensor>>> params;  // [step][rank] params after the step
  std::vector<std::vector<std::uint64_t>> n_bits;            // [step][rank]
  std::vector<std::map<std::string, double>> phases;         // rank 0, per step
  std::vector<double> step_time;                             // rank 0
  std::vector<std::unique_ptr<algorithms::Algorithm>> algorithms;
  double lr = 0.0;  // every step's (the scenario's constant lr)
};

struct Net {
  double latency_us = 5.0;
  double bandwidth_GBps = 1.0;
  double gflops = 1.0;
  double memory_GBps = 1e9;  // copies and updates cost (almost) nothing: closed forms stay simple
};

inline runner::Scenario make_scenario(const nlohmann::json& algorithm, int ranks, const Net& net = {}) {
  return runner::parse_scenario({{"name", "t"},
                                 {"ranks", ranks},
                                 {"steps", 1},
                                 {"workload", {{"type", "logistic_regression"}}},
                                 {"algorithm", algorithm},
                                 {"topology", {{"kind", "ring"}}},
                                 {"network", {{"model", "alpha_beta"}, {"latency_us", net.latency_us},
                                              {"bandwidth_GBps", net.bandwidth_GBps}}},
                                 {"compute", {{"gflops", net.gflops}, {"memory_GBps", net.memory_GBps}}}});
}

// Called after each step of each rank (t counts from 1), to record what else a test needs.
using AfterStep = std::function<void(algorithms::Algorithm&, int rank, std::int64_t t)>;

inline sim::Task<void> staged_rank_loop(comm::Communicator& comm, const FakeModel& m, int steps, Trace& trace,
                                        const AfterStep& after_step) {
  const int rank = comm.rank();
  auto& algorithm = *trace.algorithms[rank];
  auto params = initial_params(m);
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(at::zeros_like(p));
  comm::PhaseTimer timer(comm);
  FakeBackward backward(comm, m, params, grads);
  co_await algorithm.start(comm, params);
  for (std::int64_t t = 1; t <= steps; ++t) {
    const double begin = comm.now();
    algorithms::StepContext ctx{comm, timer, params, grads, t, trace.lr};
    backward.t = t;
    if (algorithm.drives_backward()) {
      ctx.backward = &backward;
    } else {
      for (std::size_t k = 0; k < backward.stages(); ++k) co_await backward.run_stage(k);
    }
    trace.n_bits[t - 1][rank] = co_await algorithm.step(ctx);
    for (const auto& p : params) trace.params[t - 1][rank].push_back(p.clone());
    if (after_step) after_step(algorithm, rank, t);
    const auto times = timer.take_step();
    if (rank == 0) {
      trace.step_time.push_back(comm.now() - begin);
      for (std::size_t i = 0; i < times.size(); ++i) trace.phases[t - 1][timer.names()[i]] = times[i];
    }
  }
}

// `steps` steps of `algorithm` on `ranks` ranks of the model `m`.
inline Trace run_staged(const nlohmann::json& algorithm, const FakeModel& m, int ranks, int steps, const Net& net = {},
                        const AfterStep& after_step = {}) {
  const auto s = make_scenario(algorithm, ranks, net);
  sim::Engine engine;
  auto network =
      std::make_shared<net::Network>(engine, net::make_topology(s.topology, s.ranks, s.network.nominal), s.network);
  comm::EmulatedWorld world(engine, network, s.compute);
  Trace trace;
  trace.params.assign(steps, std::vector<std::vector<at::Tensor>>(ranks));
  trace.n_bits.assign(steps, std::vector<std::uint64_t>(ranks));
  trace.phases.resize(steps);
  trace.lr = s.algorithm.optimizer.lr;
  for (int r = 0; r < ranks; ++r) trace.algorithms.push_back(algorithms::make_algorithm(s.algorithm, network->topology(), r));
  for (int r = 0; r < ranks; ++r) engine.spawn(staged_rank_loop(world.communicator(r), m, steps, trace, after_step), "rank");
  engine.run();
  return trace;
}

// The simulated time of one all-reduce of `elements` floats over `ranks` ranks of an
// otherwise idle network.
inline double lone_all_reduce_time(std::int64_t elements, int ranks, const Net& net, comm::ReduceOp op) {
  const auto s = make_scenario({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}}, ranks, net);
  sim::Engine engine;
  auto network =
      std::make_shared<net::Network>(engine, net::make_topology(s.topology, s.ranks, s.network.nominal), s.network);
  comm::EmulatedWorld world(engine, network, s.compute);
  double done = 0.0;
  auto rank = [&](comm::Communicator& c) -> sim::Task<void> {
    at::Tensor x = at::ones({elements}, at::kFloat);
    co_await c.all_reduce(x, op);
    done = std::max(done, c.now());
  };
  for (int r = 0; r < ranks; ++r) engine.spawn(rank(world.communicator(r)), "rank");
  engine.run();
  return done;
}

}  // namespace dtsim::testing
