// Shared by the ring recurrence tests (ring_recurrence_test.cpp, ring_wavefront_test.cpp):
// ring schedules and spread-out arrival times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "network_models/collective_execution.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology.hpp"
#include "network_models/transport.hpp"
#include "sim/engine.hpp"
#include "sim/time_grid.hpp"

namespace dtsim::net::testing {

// A ring collective over n ranks; an all-gather's blocks each of its own size.
inline Schedule ring_schedule(CollectiveKind kind, int n, std::int64_t elements) {
  CollectiveSpec spec{.kind = kind, .algorithm = Algorithm::Ring, .ranks = n, .elements = elements};
  if (kind == CollectiveKind::AllGather)
    for (int r = 0; r < n; ++r) spec.block_elements.push_back(1000 + 37 * r);
  return make_schedule(spec);
}

// Arrivals spread uniformly over `spread` seconds after `base`, on the grid when it has
// one; with `late`, rank n / 2 comes that much later still.
inline std::vector<double> spread_arrivals(int n, double base, double spread, const sim::TimeGrid& grid,
                                           std::uint64_t seed, double late = 0.0) {
  std::mt19937_64 rng(seed);
  std::vector<double> a;
  for (int r = 0; r < n; ++r) a.push_back(grid.round(base + std::uniform_real_distribution<double>(0.0, spread)(rng)));
  if (late > 0.0) a[static_cast<std::size_t>(n / 2)] = grid.round(a[static_cast<std::size_t>(n / 2)] + late);
  return a;
}

struct RingRun {
  std::vector<double> at;      // per rank: when it was done
  std::uint64_t messages = 0;  // the transport sent
};

// Every rank arrives at arrival[r] in `schedule` on a fresh engine with `grid` and
// `model`'s transport, rings computed from their recurrence (`evaluate`) or simulated;
// `alone_on_engine`: the flow model may compute them without collective reuse
// (ScheduledExecution::alone_on_its_engine).
inline RingRun run_ring(const std::string& model, const Topology& topology, const Schedule& schedule,
                        const std::vector<double>& arrival, bool evaluate, sim::TimeGrid grid,
                        const Perturbations& perturbations, bool alone_on_engine) {
  sim::Engine engine(grid);
  auto transport = make_transport(model, engine, topology, perturbations);
  transport->shortcuts().evaluate_rings(evaluate);
  RingRun done;
  done.at.assign(static_cast<std::size_t>(schedule.size()), -1.0);
  auto exec = std::make_shared<ScheduledExecution>(*transport, std::make_shared<const Schedule>(schedule),
                                                   [&](int r) { done.at[static_cast<std::size_t>(r)] = engine.now(); });
  if (alone_on_engine) exec->alone_on_its_engine();
  for (int r = 0; r < schedule.size(); ++r) engine.call_at(arrival[static_cast<std::size_t>(r)], [exec, r] { exec->arrive(r); });
  engine.run();
  done.messages = transport->messages_sent();
  return done;
}

}  // namespace dtsim::net::testing
