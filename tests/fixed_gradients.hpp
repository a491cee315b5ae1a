// An algorithm driven on R emulated ranks (a ring of alpha-beta links) with gradients fixed
// in advance: every rank starts from the same parameters, and rank r's gradient of tensor
// i at step t is a seeded normal draw, so a test can replay the same steps in a reference
// written with plain ATen. Records every rank's parameters and n_bits after every step.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <functional>
#include <memory>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "comm/emulated.hpp"
#include "comm/phase_timer.hpp"
#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"
#include "sim/engine.hpp"

namespace dtsim::testing {

using Shapes = std::vector<std::vector<std::int64_t>>;

// The initial parameters, the same on every rank.
inline std::vector<at::Tensor> fixed_parameters(const Shapes& shapes) {
  std::vector<at::Tensor> params;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    params.push_back(at::randn(shapes[i], at::detail::createCPUGenerator(1000 + i)));
  return params;
}

// Rank r's gradient of tensor i at step t (from 1).
inline at::Tensor fixed_gradient(const Shapes& shapes, int r, std::int64_t t, std::size_t i) {
  const auto seed = static_cast<std::uint64_t>(((r + 1) * 1000 + t) * 100 + static_cast<std::int64_t>(i));
  return at::randn(shapes[i], at::detail::createCPUGenerator(seed));
}

struct FixedRun {
  std::vector<std::unique_ptr<algorithms::Algorithm>> algorithms;  // [r]
  std::vector<std::vector<std::vector<at::Tensor>>> params;         // [t - 1][r][i], after step t
  std::vector<std::vector<std::uint64_t>> n_bits;                   // [t - 1][r]
  std::vector<std::vector<std::uint64_t>> wire_bytes;               // [t - 1][r]
};

// Called on rank r before (after = false) and after step t.
using StepHook = std::function<void(int r, std::int64_t t, bool after, const std::vector<at::Tensor>& params)>;

// Runs `steps` steps of make(r) on `ranks` ranks at a constant `lr`.
inline FixedRun run_fixed_gradients(const std::function<std::unique_ptr<algorithms::Algorithm>(int)>& make, int ranks,
                                    const Shapes& shapes, std::int64_t steps, double lr, const StepHook& hook = {}) {
  sim::Engine engine;
  net::NetworkConfig config;
  config.model = "alpha_beta";
  config.nominal = {2e-6, 1e10};
  auto network =
      std::make_shared<net::Network>(engine, net::make_topology(net::parse_topology("ring"), ranks, config.nominal), config);
  comm::EmulatedWorld world(engine, network, comm::ComputeTiming{});
  FixedRun run;
  run.params.assign(static_cast<std::size_t>(steps), std::vector<std::vector<at::Tensor>>(static_cast<std::size_t>(ranks)));
  run.n_bits.assign(static_cast<std::size_t>(steps), std::vector<std::uint64_t>(static_cast<std::size_t>(ranks)));
  run.wire_bytes = run.n_bits;
  for (int r = 0; r < ranks; ++r) run.algorithms.push_back(make(r));
  auto rank_loop = [&](comm::Communicator& comm) -> sim::Task<void> {
    const int r = comm.rank();
    auto params = fixed_parameters(shapes);
    std::vector<at::Tensor> grads(shapes.size());
    comm::PhaseTimer timer(comm);
    for (std::int64_t t = 1; t <= steps; ++t) {
      for (std::size_t i = 0; i < shapes.size(); ++i) grads[i] = fixed_gradient(shapes, r, t, i);
      if (hook) hook(r, t, false, params);
      const auto before = comm.traffic().wire_bytes;
      algorithms::StepContext ctx{comm, timer, params, grads, t, lr};
      const auto bits = co_await run.algorithms[static_cast<std::size_t>(r)]->step(ctx);
      if (hook) hook(r, t, true, params);
      for (const auto& p : params) run.params[t - 1][r].push_back(p.clone());
      run.n_bits[t - 1][r] = bits;
      run.wire_bytes[t - 1][r] = comm.traffic().wire_bytes - before;
      timer.take_step();
    }
  };
  for (int r = 0; r < ranks; ++r) engine.spawn(rank_loop(world.communicator(r)), "rank " + std::to_string(r));
  engine.run();
  return run;
}

}  // namespace dtsim::testing
