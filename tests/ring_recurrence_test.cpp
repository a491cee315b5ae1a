// net::ring_done_times (network_models/ring_recurrence.hpp) and ScheduledExecution's use
// of it: on the uncontended model a ring collective computed from its recurrence is done
// at the times the message-by-message simulation gives, to the last bit, on the time
// grid and off it, below its horizon and beyond, with unequal chunks, overheads and a
// slower link; and it is not used where messages must exist or may meet something.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "network_models/collective_execution.hpp"
#include "network_models/network_model.hpp"
#include "network_models/ring_recurrence.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology.hpp"
#include "network_models/transport.hpp"
#include "sim/engine.hpp"
#include "sim/time_grid.hpp"
#include "tests/ring_test_support.hpp"

namespace dtsim::net {
namespace {

using testing::ring_schedule;

using Done = testing::RingRun;

// `model`'s transport, the ring recurrence on or off (the flow model's only with
// collective reuse: none here, so it simulates).
Done run(const std::string& model, const Topology& topology, const Schedule& schedule,
         const std::vector<double>& arrival, bool evaluate, sim::TimeGrid grid, const Perturbations& perturbations = {}) {
  return testing::run_ring(model, topology, schedule, arrival, evaluate, grid, perturbations, false);
}

TEST(RingRecurrence, EqualsTheSimulationBitForBit) {
  const LinkParams link{.latency_s = 5e-6, .bandwidth_bytes_per_s = 1.25e9};
  struct Net {
    std::string name;
    Topology topology;
  };
  const std::vector<Net> nets{{"ring of 9", Topology::ring(9, link)},
                              {"4 x 4 torus", Topology::torus({4, 4}, link)},
                              {"fat tree", Topology::fat_tree(16, 4, link)}};
  const std::vector<std::pair<std::string, sim::TimeGrid>> grids{{"grid 2^-47", sim::TimeGrid::from_resolution(1e-14)},
                                                                 {"plain doubles", sim::TimeGrid{}}};
  // 0.3 s and 3.7 s: below the default grid's horizon (64 s); 100 s: beyond it.
  const std::vector<double> bases{0.3, 3.7, 100.0};
  std::uint64_t seed = 1;
  for (const auto& net : nets)
    for (const auto& [grid_name, grid] : grids)
      for (double base : bases)
        for (const auto kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather})
          for (const double overhead : {0.0, 1.5e-6}) {
            const int n = net.topology.size();
            const Schedule schedule = ring_schedule(kind, n, 1000003);  // chunks an element apart
            const auto arrival = testing::spread_arrivals(n, base, 40e-6, grid, seed++);
            const Perturbations perturbations{.overhead_s = overhead};
            const Done simulated = run("alpha_beta", net.topology, schedule, arrival, false, grid, perturbations);
            const Done evaluated = run("alpha_beta", net.topology, schedule, arrival, true, grid, perturbations);
            const std::string what = net.name + ", " + grid_name + ", " + to_string(kind) + ", from " +
                                     std::to_string(base) + " s, overhead " + std::to_string(overhead);
            EXPECT_EQ(evaluated.at, simulated.at) << what;
            EXPECT_GT(simulated.messages, 0u) << what;
            EXPECT_EQ(evaluated.messages, 0u) << what;
          }
}

// Links of several bandwidths (one cable slowed to a fifth before the collective): the
// recurrence takes each sender's bottleneck, message by message.
TEST(RingRecurrence, EqualsTheSimulationWithASlowerLink) {
  const LinkParams link{.latency_s = 2e-6, .bandwidth_bytes_per_s = 10e9};
  const auto topology = Topology::torus({4, 4}, link);
  const Perturbations slower{.bandwidth_trace = {{.time_s = 0.0, .a = 5, .b = 6, .bandwidth_bytes_per_s = 2e9}}};
  const Schedule schedule = ring_schedule(CollectiveKind::AllReduce, 16, 5000011);
  for (const auto& grid : {sim::TimeGrid::from_resolution(1e-14), sim::TimeGrid{}}) {
    const auto arrival = testing::spread_arrivals(16, 0.5, 40e-6, grid, 7);
    const Done simulated = run("alpha_beta", topology, schedule, arrival, false, grid, slower);
    const Done evaluated = run("alpha_beta", topology, schedule, arrival, true, grid, slower);
    EXPECT_EQ(evaluated.at, simulated.at);
    EXPECT_EQ(evaluated.messages, 0u);
  }
}

// Where messages matter, every one is simulated: jitter draws one per message, a
// bandwidth change still to come may fall inside the collective, the flow model's
// messages interact, and a tree is no ring.
TEST(RingRecurrence, NotUsedWhereMessagesMatter) {
  const LinkParams link{.latency_s = 5e-6, .bandwidth_bytes_per_s = 1.25e9};
  const auto topology = Topology::torus({4, 4}, link);
  const auto grid = sim::TimeGrid::from_resolution(1e-14);
  const auto arrival = testing::spread_arrivals(16, 0.1, 40e-6, grid, 3);
  const Schedule ring = ring_schedule(CollectiveKind::AllReduce, 16, 1 << 16);
  EXPECT_EQ(run("alpha_beta", topology, ring, arrival, true, grid).messages, 0u);  // the control
  const Perturbations jitter{.jitter_s = 1e-6, .jitter_seed = 5};
  EXPECT_GT(run("alpha_beta", topology, ring, arrival, true, grid, jitter).messages, 0u);
  const Perturbations later_change{.bandwidth_trace = {{.time_s = 0.2, .a = 0, .b = 1, .bandwidth_bytes_per_s = 1e9}}};
  EXPECT_GT(run("alpha_beta", topology, ring, arrival, true, grid, later_change).messages, 0u);
  EXPECT_GT(run("flow", topology, ring, arrival, true, grid).messages, 0u);
  const Schedule tree = make_schedule(
      {.kind = CollectiveKind::AllReduce, .algorithm = Algorithm::DoubleBinaryTree, .ranks = 16, .elements = 1 << 16});
  EXPECT_GT(run("alpha_beta", topology, tree, arrival, true, grid).messages, 0u);
}

// The recurrence waits for the last arrival, which is right only for rings in which
// every rank's result needs every rank: at least ranks - 1 steps, two ranks or more.
TEST(RingRecurrence, OnlyRingsThatWaitForEveryRank) {
  EXPECT_TRUE(ring_waits_for_every_rank(ring_schedule(CollectiveKind::AllReduce, 8, 100)));
  EXPECT_TRUE(ring_waits_for_every_rank(ring_schedule(CollectiveKind::ReduceScatter, 8, 100)));
  EXPECT_TRUE(ring_waits_for_every_rank(ring_schedule(CollectiveKind::AllGather, 8, 100)));
  EXPECT_FALSE(ring_waits_for_every_rank(ring_schedule(CollectiveKind::AllReduce, 1, 100)));
  Schedule short_ring = ring_schedule(CollectiveKind::AllReduce, 8, 100);
  short_ring.ring.steps = 3;  // rank 7 is done before rank 0 need arrive
  EXPECT_FALSE(ring_waits_for_every_rank(short_ring));
  EXPECT_FALSE(ring_waits_for_every_rank(make_schedule(
      {.kind = CollectiveKind::AllReduce, .algorithm = Algorithm::HalvingDoubling, .ranks = 8, .elements = 100})));
}

// A rank that arrives twice is a caller's bug; the recurrence would take the second
// arrival for a missing one's, so it says so instead: on the uncontended model, and on
// the flow model's computed rings (ring_wavefront.hpp).
TEST(RingRecurrence, ARankArrivingTwiceIsAnError) {
  for (const auto& entry : network_model_table()) {
    if (!entry.rings_as_recurrence) continue;
    const std::string model(entry.name);
    sim::Engine engine(sim::TimeGrid::from_resolution(1e-14));
    auto transport = make_transport(model, engine, Topology::ring(4, {.latency_s = 1e-6, .bandwidth_bytes_per_s = 1e9}), {});
    auto exec = std::make_shared<ScheduledExecution>(
        *transport, std::make_shared<const Schedule>(ring_schedule(CollectiveKind::AllReduce, 4, 1000)), [](int) {});
    exec->alone_on_its_engine();  // the flow model computes it without collective reuse's restarts
    for (int r : {0, 1, 1}) engine.call_at(0.0, [exec, r] { exec->arrive(r); });
    try {
      engine.run();
      ADD_FAILURE() << "expected an error, " << model;
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "ring: rank 1 arrived twice in one collective") << model;
    }
  }
}

}  // namespace
}  // namespace dtsim::net
