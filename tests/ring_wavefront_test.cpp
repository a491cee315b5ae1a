// net::RingWavefront (network_models/ring_wavefront.hpp) through ScheduledExecution: on
// the flow model a ring computed from its recurrence where its senders are alone, and
// simulated where their routes share links, is done at the times the message-by-message
// simulation gives, to the last bit. (Traffic that would meet a computed ring restarts the
// run: collective_reuse_test.cpp, which has the runs and their restarts.)
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "network_models/collective_execution.hpp"
#include "network_models/collective_reuse.hpp"
#include "network_models/ring_recurrence.hpp"
#include "network_models/ring_wavefront.hpp"
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

// Alone on its engine on the flow model: computed where it can be (`evaluate`), or simulated.
Done run(const Topology& topology, const Schedule& schedule, const std::vector<double>& arrival, bool evaluate,
         sim::TimeGrid grid, const Perturbations& perturbations = {}) {
  return testing::run_ring("flow", topology, schedule, arrival, evaluate, grid, perturbations, true);
}

struct Net {
  std::string name;
  Topology topology;
};

std::vector<Net> nets() {
  const LinkParams link{.latency_s = 5e-6, .bandwidth_bytes_per_s = 1.25e9};
  return {{"ring of 9", Topology::ring(9, link)},           {"star of 8", Topology::star(8, link)},
          {"4 x 4 torus", Topology::torus({4, 4}, link)},   {"8 x 8 torus", Topology::torus({8, 8}, link)},
          {"fat tree", Topology::fat_tree(16, 4, link)},    {"2 x 4 nodes", Topology::hierarchical(8, 4, true, link, link)},
          {"4 x 4 x 4 torus", Topology::torus({4, 4, 4}, link)}, {"hypercube of 16", Topology::hypercube(16, link)}};
}

TEST(RingWavefront, EqualsTheSimulationBitForBit) {
  const std::vector<std::pair<std::string, sim::TimeGrid>> grids{{"grid 2^-47", sim::TimeGrid::from_resolution(1e-14)},
                                                                 {"plain doubles", sim::TimeGrid{}}};
  struct Spread {
    std::string name;
    double spread, late;
  };
  const std::vector<Spread> spreads{{"together", 0.0, 0.0}, {"40 us apart", 40e-6, 0.0}, {"one 3 ms late", 40e-6, 3e-3}};
  std::uint64_t seed = 1;
  for (const auto& net : nets())
    for (const auto& [grid_name, grid] : grids)
      for (double base : {0.3, 100.0})
        for (const auto& spread : spreads)
          for (const auto kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather})
            for (const double overhead : {0.0, 1.5e-6}) {
              const int n = net.topology.size();
              const Schedule schedule = ring_schedule(kind, n, 1000003);
              const auto arrival = testing::spread_arrivals(n, base, spread.spread, grid, seed++, spread.late);
              const Perturbations perturbations{.overhead_s = overhead};
              const Done simulated = run(net.topology, schedule, arrival, false, grid, perturbations);
              const Done evaluated = run(net.topology, schedule, arrival, true, grid, perturbations);
              const std::string what = net.name + ", " + grid_name + ", " + to_string(kind) + ", from " +
                                       std::to_string(base) + " s, " + spread.name + ", overhead " + std::to_string(overhead);
              EXPECT_EQ(evaluated.at, simulated.at) << what;
              EXPECT_LT(evaluated.messages, simulated.messages) << what;
            }
}

// On an 8 x 8 torus two senders of 64 are coupled (ranks 7 and 63, whose routes share a
// wrap-around link): theirs are the only messages sent, one per step each.
TEST(RingWavefront, OnlyTheCoupledSendersMessagesAreSent) {
  const LinkParams link{.latency_s = 5e-6, .bandwidth_bytes_per_s = 1.25e9};
  const auto torus = Topology::torus({8, 8}, link);
  const auto grid = sim::TimeGrid::from_resolution(1e-14);
  const Schedule schedule = ring_schedule(CollectiveKind::AllReduce, 64, 1 << 20);
  sim::Engine engine(grid);
  auto transport = make_transport("flow", engine, torus, {});
  struct NoHooks final : RingWavefront::Hooks {
    void send_at(int, int, double) override {}
    void done_at(int, double) override {}
    void links_free_after(int, double) override {}
  } hooks;
  const RingWavefront wavefront(schedule, *transport, hooks);
  EXPECT_EQ(wavefront.coupled_count(), 2);
  EXPECT_TRUE(wavefront.coupled(7));
  EXPECT_TRUE(wavefront.coupled(63));
  const auto arrival = testing::spread_arrivals(64, 0.2, 40e-6, grid, 11);
  const Done evaluated = run(torus, schedule, arrival, true, grid);
  EXPECT_EQ(evaluated.messages, 2u * static_cast<std::uint64_t>(schedule.ring.steps));
  EXPECT_EQ(evaluated.at, run(torus, schedule, arrival, false, grid).at);
}

// A sender whose transfer starts the instant its send is made (no latency, no overhead)
// could touch its own previous message on a link: every message is simulated.
TEST(RingWavefront, NotUsedWithoutADelay) {
  const auto ring = Topology::ring(8, {.latency_s = 0.0, .bandwidth_bytes_per_s = 1.25e9});
  const auto grid = sim::TimeGrid::from_resolution(1e-14);
  const Schedule schedule = ring_schedule(CollectiveKind::AllReduce, 8, 1 << 16);
  const auto arrival = testing::spread_arrivals(8, 0.2, 40e-6, grid, 5);
  const Done evaluated = run(ring, schedule, arrival, true, grid);
  const Done simulated = run(ring, schedule, arrival, false, grid);
  EXPECT_EQ(evaluated.at, simulated.at);
  EXPECT_EQ(evaluated.messages, simulated.messages);
  const Done with_overhead = run(ring, schedule, arrival, true, grid, {.overhead_s = 1e-6});
  EXPECT_EQ(with_overhead.messages, 0u);  // the control: a delay, every sender alone
}

}  // namespace
}  // namespace dtsim::net
