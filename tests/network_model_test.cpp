// Network models: every collective's schedule against its closed form on a topology
// where it meets no contention (both the uncontended and the max-min flow model), the
// max-min solver on textbook cases, perturbations, link failures, the topologies'
// routes and mixing matrices, and the tables of network models and algorithms.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "network_models/closed_form.hpp"
#include "network_models/collective_execution.hpp"
#include "network_models/fastest_algorithm.hpp"
#include "network_models/network.hpp"
#include "network_models/network_model.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology.hpp"
#include "network_models/topology_kinds.hpp"
#include "network_models/topology_spec.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {
namespace {

constexpr double kAlpha = 5e-6;   // 5 us
constexpr double kBeta = 12.5e9;  // 12.5 GB/s
const LinkParams kLink{kAlpha, kBeta};

double relative_error(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

double slowest(const std::vector<double>& finish) { return *std::max_element(finish.begin(), finish.end()); }

struct Case {
  CollectiveKind kind;
  Algorithm algorithm;
  std::string topology;  // where every message crosses one uncontended link
  std::vector<int> ranks;
};

// The schedule's time on an idle network equals the closed form to 1e-9, on both
// models, for several rank counts and sizes divisible into equal chunks.
TEST(Collectives, MatchClosedFormsWithoutContention) {
  const std::vector<Case> cases{
      {CollectiveKind::AllReduce, Algorithm::Ring, "ring", {2, 3, 5, 8, 16, 64}},
      {CollectiveKind::AllReduce, Algorithm::HalvingDoubling, "hypercube", {2, 4, 8, 16, 64}},
      {CollectiveKind::AllReduce, Algorithm::DoubleBinaryTree, "complete", {2, 3, 4, 7, 8, 16}},
      {CollectiveKind::AllReduce, Algorithm::Direct, "complete", {2, 5, 16}},
      {CollectiveKind::AllReduce, Algorithm::ParameterServer, "complete", {2, 5, 16}},
      {CollectiveKind::ReduceScatter, Algorithm::Ring, "ring", {2, 6, 32}},
      {CollectiveKind::ReduceScatter, Algorithm::Direct, "complete", {3, 8}},
      {CollectiveKind::AllGather, Algorithm::Ring, "ring", {2, 7, 32}},
      {CollectiveKind::AllGather, Algorithm::Direct, "complete", {3, 8}},
      {CollectiveKind::Broadcast, Algorithm::Binomial, "hypercube", {2, 8, 32}},
      {CollectiveKind::Broadcast, Algorithm::Binomial, "complete", {3, 13}},
  };
  for (const auto& c : cases)
    for (int n : c.ranks)
      for (std::int64_t per_rank : {1, 1000, 250000}) {
        CollectiveSpec spec{.kind = c.kind, .algorithm = c.algorithm, .ranks = n, .elements = per_rank * n * 2};
        spec.block_elements.assign(n, per_rank);
        const auto topology = make_topology(parse_topology(c.topology), n, kLink);
        const auto schedule = make_schedule(spec);
        const double want = closed_form_seconds(spec, kAlpha, kBeta);
        for (const char* model : {"alpha_beta", "flow"}) {
          const auto finish = simulate(model, topology, schedule, std::vector<double>(n, 0.25));
          EXPECT_LT(relative_error(slowest(finish) - 0.25, want), 1e-9)
              << to_string(c.kind) << " " << to_string(c.algorithm) << " on " << c.topology << " n=" << n
              << " elements=" << spec.elements << " model=" << model << ": " << slowest(finish) - 0.25 << " vs "
              << want;
        }
      }
}

// Every byte sent is received: per schedule, the sum over ranks of both agree, and the
// ring all-reduce moves 2 (n-1) S in total even with uneven chunks.
TEST(Collectives, BytesSentEqualBytesReceived) {
  for (auto kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                    CollectiveKind::Broadcast})
    for (auto algorithm : algorithms_for(kind))
      for (int n : {1, 2, 5, 12}) {
        CollectiveSpec spec{.kind = kind, .algorithm = algorithm, .ranks = n, .elements = 1001, .root = n - 1};
        for (int r = 0; r < n; ++r) spec.block_elements.push_back(r + 3);
        const auto s = make_schedule(spec);
        double sent = 0, received = 0;
        for (int r = 0; r < n; ++r) {
          sent += s.bytes_sent(r);
          received += s.bytes_received(r);
        }
        EXPECT_DOUBLE_EQ(sent, received) << to_string(kind) << " " << to_string(algorithm) << " n=" << n;
        if (kind == CollectiveKind::AllReduce && algorithm == Algorithm::Ring) {
          EXPECT_DOUBLE_EQ(sent, 2.0 * (n - 1) * 1001 * 4);
        }
      }
}

// Each implementation's counts (what the resource estimate reads) are those of the
// schedule it builds: messages and explicit entries exactly, distinct pairs and messages
// in flight (every rank's first step at once) within their bounds, neighbour pairs where
// said.
TEST(Collectives, CountsAreThoseOfTheSchedule) {
  for (const auto& entry : collective_algorithms())
    for (const auto& impl : entry.implementations)
      for (int n : {1, 2, 3, 5, 8, 12}) {
        CollectiveSpec spec{.kind = impl.kind, .algorithm = entry.id, .ranks = n, .elements = 1001, .root = n / 2};
        for (int r = 0; r < n; ++r) spec.block_elements.push_back(r + 3);
        const auto s = make_schedule(spec);
        const auto counts = schedule_counts(entry.id, impl.kind, n);
        const auto what = fmt::format("{} {} n={}", entry.name, to_string(impl.kind), n);
        std::set<std::pair<int, int>> pairs;
        double first_steps = 0, transfers = 0;
        bool neighbours = true;
        Step scratch;
        for (int r = 0; r < n; ++r)
          for (int lane = 0; lane < s.lane_count(r); ++lane)
            for (std::size_t k = 0; k < s.step_count(r, lane); ++k)
              for (const auto& t : s.step(r, lane, k, scratch).sends) {
                pairs.insert({r, t.peer});
                neighbours = neighbours && t.peer == (r + 1) % n;
                transfers += 1;
                if (k == 0) first_steps += 1;
              }
        EXPECT_EQ(counts.messages, static_cast<double>(s.messages())) << what;
        EXPECT_EQ(counts.schedule_transfers, s.compact_ring() ? 0.0 : transfers) << what;
        EXPECT_GE(counts.pairs, static_cast<double>(pairs.size())) << what;
        EXPECT_LE(counts.pairs, counts.messages) << what;
        EXPECT_GE(counts.in_flight, first_steps) << what;
        if (counts.neighbour_pairs) {
          EXPECT_TRUE(neighbours) << what;
        }
      }
  EXPECT_THROW(schedule_counts(Algorithm::Binomial, CollectiveKind::AllReduce, 4), std::invalid_argument);
}

// A late rank delays a ring all-reduce by exactly its lateness when everyone else
// waits on it.
TEST(Collectives, LateArrivalShiftsTheRing) {
  const int n = 6;
  const auto topology = Topology::ring(n, kLink);
  const auto schedule = make_schedule({.kind = CollectiveKind::AllReduce, .algorithm = Algorithm::Ring, .ranks = n,
                                       .elements = 6000});
  std::vector<double> on_time(n, 0.0), late(n, 0.0);
  late[2] = 1e-3;
  auto a = simulate("flow", topology, schedule, on_time);
  auto b = simulate("flow", topology, schedule, late);
  for (int r = 0; r < n; ++r) EXPECT_GE(b[r], a[r]);
  EXPECT_NEAR(slowest(b), slowest(a) + 1e-3, 1e-12);
}

// Max-min textbook case 1: two flows into one rank through a switch share its link.
// Also when the second starts in an event of its own at the same instant (a no-op
// between the two starts): the first, alone on its links when it starts, is given the
// whole link at once (FlowTransport::transmit), and the second's joining it must
// still halve that before any byte moves.
TEST(FlowModel, TwoFlowsOnOneLinkEachGetHalf) {
  for (const bool noop_between : {false, true}) {
    sim::Engine engine;
    FlowTransport flows(engine, Topology::star(3, {0.0, 1.0}), {});
    double t0 = -1, t1 = -1;
    flows.send(0, 2, 1.0, [&] { t0 = engine.now(); });
    if (noop_between) engine.call_at(0.0, [] {});
    flows.send(1, 2, 1.0, [&] { t1 = engine.now(); });
    engine.run();
    EXPECT_DOUBLE_EQ(t0, 2.0) << noop_between;
    EXPECT_DOUBLE_EQ(t1, 2.0) << noop_between;
  }
}

// Max-min textbook case 2, the parking lot: A-B-C with unit links; f0 A->C (2 bytes),
// f1 A->B (1 byte), f2 B->C (3 bytes). All get 1/2 until f1 ends at t=2; f0 keeps 1/2
// (it shares B-C with f2) and ends at t=4; f2 then runs alone at 1 and ends at t=5.
TEST(FlowModel, ParkingLot) {
  sim::Engine engine;
  FlowTransport flows(engine, Topology::from_edges(3, 3, {{0, 1, {0.0, 1.0}}, {1, 2, {0.0, 1.0}}}), {});
  std::vector<double> done(3, -1);
  flows.send(0, 2, 2.0, [&] { done[0] = engine.now(); });
  flows.send(0, 1, 1.0, [&] { done[1] = engine.now(); });
  flows.send(1, 2, 3.0, [&] { done[2] = engine.now(); });
  engine.run();
  EXPECT_DOUBLE_EQ(done[1], 2.0);
  EXPECT_DOUBLE_EQ(done[0], 4.0);
  EXPECT_DOUBLE_EQ(done[2], 5.0);
}

// Unequal capacities: on A-B (capacity 1) and B-C (capacity 2), f0 A->C and f1 A->B
// split A-B; f2 B->C takes what f0 leaves of B-C: 1.5.
TEST(FlowModel, MaxMinGivesLeftoverCapacityToOthers) {
  sim::Engine engine;
  FlowTransport flows(engine, Topology::from_edges(3, 3, {{0, 1, {0.0, 1.0}}, {1, 2, {0.0, 2.0}}}), {});
  double f2 = -1;
  flows.send(0, 2, 10.0, [] {});
  flows.send(0, 1, 10.0, [] {});
  flows.send(1, 2, 1.5, [&] { f2 = engine.now(); });
  engine.run();
  EXPECT_DOUBLE_EQ(f2, 1.0);
}

// Latency is paid first, then the bytes flow; a flow alone takes latency + b / bw.
TEST(FlowModel, LatencyThenBandwidth) {
  sim::Engine engine;
  FlowTransport flows(engine, Topology::ring(8, kLink), {});
  double t = -1;
  flows.send(0, 3, 1e6, [&] { t = engine.now(); });
  engine.run();
  EXPECT_LT(relative_error(t, 3 * kAlpha + 1e6 / kBeta), 1e-12);
}

// Sends whose bytes start to flow at one time, one after another, are started by one
// engine event, in send order; an event scheduled between two of them (here a no-op at
// that time) keeps its place: the later sends get an event of their own, after it. Under
// the flow model the solve of that instant then needs an event as well: alone at their
// instant, the start event solves at its end (FlowTransport::settle_solve). The arrivals
// are the same either way, in send order, at latency + b / bw.
TEST(FlowModel, SendsStartingTogetherShareOneEvent) {
  for (const char* model : {"flow", "alpha_beta"}) {
    auto run = [&](bool event_between) {
      sim::Engine engine;
      auto transport = make_transport(model, engine, Topology::ring(4, kLink), {});
      std::vector<std::pair<int, double>> arrivals;
      for (int r = 0; r < 3; ++r) {
        if (event_between && r == 2) engine.call_at(kAlpha, [] {});
        transport->send(r, r + 1, 1e6, [&, r] { arrivals.emplace_back(r, engine.now()); });
      }
      engine.run();
      return std::pair{arrivals, engine.events_fired()};
    };
    const auto [together, events_together] = run(false);
    const auto [split, events_split] = run(true);
    ASSERT_EQ(together.size(), 3u) << model;
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(together[r].first, r) << model;
      EXPECT_LT(relative_error(together[r].second, kAlpha + 1e6 / kBeta), 1e-12) << model;
    }
    EXPECT_EQ(split, together) << model;
    // The no-op and the third start, and the flow model's solve.
    EXPECT_EQ(events_split, events_together + (std::string(model) == "flow" ? 3 : 2)) << model;
  }
}

// The rates at an instant are solved once every transfer starting then has started: in
// an event of its own after the others due then, or, when nothing else is due then, at
// the end of the event that started them, which fires the same events in the same order
// less the solve's (a completion that leaves its links empty needs no solve at all).
// One message alone: its start and its completion. With a no-op due at its start
// instant, after it: the start, the no-op, the solve, the completion. It arrives at the
// same time either way.
TEST(FlowModel, SolvesAtTheEndOfAnEventWithNothingElseDue) {
  auto run = [&](bool noop_at_start) {
    sim::Engine engine;
    FlowTransport flows(engine, Topology::ring(4, kLink), {});
    double arrived = -1;
    flows.send(0, 1, 1e6, [&] { arrived = engine.now(); });
    if (noop_at_start) engine.call_at(kAlpha, [] {});
    engine.run();
    return std::pair{arrived, engine.events_fired()};
  };
  const auto [alone, events_alone] = run(false);
  const auto [beside, events_beside] = run(true);
  EXPECT_LT(relative_error(alone, kAlpha + 1e6 / kBeta), 1e-12);
  EXPECT_EQ(beside, alone);
  EXPECT_EQ(events_alone, 2u);
  EXPECT_EQ(events_beside, 4u);
}

// Per-message overhead and a bandwidth change apply to every message of a collective.
TEST(Perturbations, OverheadAndBandwidthTrace) {
  const int n = 4;
  const auto schedule = make_schedule({.kind = CollectiveKind::AllReduce, .algorithm = Algorithm::Ring, .ranks = n,
                                       .elements = 4000});
  const double S = 16000.0;
  Perturbations p;
  p.overhead_s = 1e-6;
  for (int r = 0; r < n; ++r) p.bandwidth_trace.push_back({0.0, r, (r + 1) % n, kBeta / 2});
  for (const char* model : {"alpha_beta", "flow"}) {
    const auto finish = simulate(model, Topology::ring(n, kLink), schedule, std::vector<double>(n, 0.0), p);
    EXPECT_LT(relative_error(slowest(finish), 2.0 * (n - 1) * (1e-6 + kAlpha + 2 * S / (n * kBeta))), 1e-9) << model;
  }
}

// Seeded jitter: same seed, same times; another seed, other times; never faster.
TEST(Perturbations, JitterIsSeededAndOnlyAddsLatency) {
  const int n = 5;
  const auto topology = Topology::ring(n, kLink);
  const auto schedule = make_schedule({.kind = CollectiveKind::AllReduce, .algorithm = Algorithm::Ring, .ranks = n,
                                       .elements = 5000});
  Perturbations p;
  p.jitter_s = 2e-6;
  p.jitter_seed = 7;
  const auto a = simulate("flow", topology, schedule, std::vector<double>(n, 0.0), p);
  EXPECT_EQ(a, simulate("flow", topology, schedule, std::vector<double>(n, 0.0), p));
  p.jitter_seed = 8;
  EXPECT_NE(a, simulate("flow", topology, schedule, std::vector<double>(n, 0.0), p));
  EXPECT_GT(slowest(a), closed_form_seconds({.kind = CollectiveKind::AllReduce, .algorithm = Algorithm::Ring,
                                             .ranks = n, .elements = 5000},
                                            kAlpha, kBeta));
}

// A failed ring link reroutes the long way round; a failure that disconnects the graph
// is an error naming the link.
TEST(Perturbations, LinkFailureReroutesOrErrors) {
  for (const char* model : {"alpha_beta", "flow"}) {
    sim::Engine engine;
    Perturbations p;
    p.failures.push_back({0.0, 0, 1});
    auto transport = make_transport(model, engine, Topology::ring(4, kLink), p);
    double t = -1;
    engine.call_at(1e-9, [&] { transport->send(0, 1, 1000.0, [&] { t = engine.now(); }); });
    engine.run();
    EXPECT_LT(relative_error(t, 1e-9 + 3 * kAlpha + 1000.0 / kBeta), 1e-9) << model;
  }
  sim::Engine engine;
  Perturbations p;
  p.failures.push_back({1.0, 2, 3});  // rank 2's only cable to the switch (node 3)
  FlowTransport transport(engine, Topology::star(3, kLink), p);
  try {
    engine.run();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("link 2-3 failed"), std::string::npos) << e.what();
  }
}

// A flow in flight when its link fails continues on the new route with its remaining bytes.
TEST(Perturbations, FlowInFlightMovesToTheNewRoute) {
  sim::Engine engine;
  Perturbations p;
  p.failures.push_back({0.5, 0, 1});
  FlowTransport flows(engine, Topology::ring(4, {0.0, 1.0}), p);
  double t = -1;
  flows.send(0, 1, 1.0, [&] { t = engine.now(); });  // half done at 0.5, then 0-3-2-1 at the same rate
  engine.run();
  EXPECT_DOUBLE_EQ(t, 1.0);
}

// `auto` picks the cheapest closed form: latency-bound small messages go to a tree or
// halving-doubling, a large buffer on a non-power-of-two rank count to the ring.
TEST(Collectives, AutoPicksTheCheapest) {
  CollectiveSpec small{.kind = CollectiveKind::AllReduce, .ranks = 6, .elements = 1};
  EXPECT_EQ(cheapest_algorithm(small, kAlpha, kBeta), Algorithm::DoubleBinaryTree);
  CollectiveSpec large{.kind = CollectiveKind::AllReduce, .ranks = 6, .elements = 1 << 28};
  EXPECT_EQ(cheapest_algorithm(large, kAlpha, kBeta), Algorithm::Ring);
  CollectiveSpec pow2{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = 1 << 28};
  EXPECT_EQ(cheapest_algorithm(pow2, kAlpha, kBeta), Algorithm::HalvingDoubling);
}

// `auto` on a network whose model schedules collectives is the candidate fastest when
// simulated there (network_models/fastest_algorithm.hpp). On a ring topology under the
// flow model, halving-doubling's partners are 1, 2 and 4 hops apart and its flows share
// links; its closed form sees neither and is the cheapest, but simulated it is the
// slower: for large all-reduces `auto` picks the ring, with the ring's own time, and so
// does a Network whose config leaves all-reduce to `auto`.
TEST(AutoAlgorithm, PicksTheRingForLargeAllReducesOnARingWithFlows) {
  const auto& flow = network_model("flow");
  const auto ring = Topology::ring(8, kLink);
  sim::Engine engine;
  NetworkConfig config{.model = "flow", .nominal = kLink};
  config.algorithms[CollectiveKind::AllReduce] = Algorithm::Auto;
  Network network(engine, ring, config);
  for (std::int64_t bytes : {std::int64_t{64} << 20, std::int64_t{1} << 30}) {
    const CollectiveSpec spec{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = bytes / 4};
    EXPECT_EQ(cheapest_algorithm(spec, kAlpha, kBeta), Algorithm::HalvingDoubling) << bytes;
    const auto choice = fastest_algorithm(flow, ring, kLink, spec);
    EXPECT_EQ(choice.algorithm, Algorithm::Ring) << bytes;
    CollectiveSpec as_ring = spec;
    as_ring.algorithm = Algorithm::Ring;
    EXPECT_EQ(choice.seconds, slowest(simulate(flow, ring, make_schedule(as_ring), std::vector<double>(8, 0.0))));
    EXPECT_EQ(network.resolve(spec).algorithm, Algorithm::Ring) << bytes;
  }
}

// Whatever the topology, model and size, `auto`'s choice is no slower than any other
// candidate simulated directly on the same network, its time is the chosen one's own,
// and a Network leaving all-reduce to `auto` resolves to the same choice.
TEST(AutoAlgorithm, IsNeverSlowerThanAnotherCandidate) {
  const std::vector<std::pair<std::string, int>> topologies{
      {"ring", 8}, {"torus:4x4", 16}, {"hypercube", 16}, {"complete", 7}, {"star", 6}, {"fat_tree:4", 12},
      {"exponential", 10}, {"hierarchical:4", 8}};
  const auto candidates = auto_candidates(CollectiveKind::AllReduce);
  ASSERT_EQ(candidates.size(), 3u);  // ring, halving_doubling, tree
  for (const auto& [name, n] : topologies)
    for (const char* model_name : {"alpha_beta", "flow"}) {
      const auto& model = network_model(model_name);
      const auto topology = make_topology(parse_topology(name), n, kLink);
      sim::Engine engine;
      NetworkConfig config{.model = model_name, .nominal = kLink};
      config.algorithms[CollectiveKind::AllReduce] = Algorithm::Auto;
      Network network(engine, topology, config);
      for (std::int64_t elements : {std::int64_t{1}, std::int64_t{16} << 10, std::int64_t{4} << 20}) {
        SCOPED_TRACE(fmt::format("{} ({} ranks), {}, {} elements", name, n, model_name, elements));
        const CollectiveSpec spec{.kind = CollectiveKind::AllReduce, .ranks = n, .elements = elements};
        const auto choice = fastest_algorithm(model, topology, kLink, spec);
        for (Algorithm a : candidates) {
          CollectiveSpec c = spec;
          c.algorithm = a;
          const auto schedule = make_schedule(c);
          const double seconds = slowest(simulate(model, topology, schedule, std::vector<double>(n, 0.0)));
          EXPECT_LE(choice.seconds, seconds) << to_string(a);
          // The bound `auto` skips candidates by, where messages share links.
          if (model.messages_share_links) {
            EXPECT_LE(busiest_link_seconds(topology, schedule), seconds) << to_string(a);
          }
          if (a == choice.algorithm) {
            EXPECT_EQ(choice.seconds, seconds);
          }
        }
        EXPECT_EQ(network.resolve(spec).algorithm, choice.algorithm);
      }
    }
}

// simulate_before, which `auto` gives up slower candidates with, runs as simulate()
// until its deadline: the same done times when the last rank is done before it, none
// when at or after it (a ring on a torus under flows included: its computed senders'
// links are held, and given up mid-way they are released with the messages in flight).
TEST(AutoAlgorithm, SimulateBeforeIsSimulateUntilItsDeadline) {
  const auto torus = Topology::torus({4, 4}, kLink);
  const std::vector<double> at_zero(16, 0.0);
  for (const char* model_name : {"alpha_beta", "flow"})
    for (Algorithm a : auto_candidates(CollectiveKind::AllReduce)) {
      SCOPED_TRACE(fmt::format("{}, {}", model_name, to_string(a)));
      const auto& model = network_model(model_name);
      const auto schedule =
          make_schedule({.kind = CollectiveKind::AllReduce, .algorithm = a, .ranks = 16, .elements = 1 << 20});
      const auto done = simulate(model, torus, schedule, at_zero);
      const double end = slowest(done);
      EXPECT_EQ(simulate_before(std::nextafter(end, 1.0), model, torus, schedule, at_zero), done);
      EXPECT_EQ(simulate_before(end, model, torus, schedule, at_zero), std::nullopt);
      EXPECT_EQ(simulate_before(end / 2, model, torus, schedule, at_zero), std::nullopt);
    }
}

// Where collectives are closed forms (analytical), the closed form is the model: `auto`
// picks the cheapest closed form, with its time, and simulates nothing.
TEST(AutoAlgorithm, ClosedFormModelPicksByClosedForm) {
  const auto& analytical = network_model("analytical");
  for (int n : {6, 8})
    for (std::int64_t elements : {std::int64_t{1}, std::int64_t{1} << 28}) {
      const CollectiveSpec spec{.kind = CollectiveKind::AllReduce, .ranks = n, .elements = elements};
      const auto topology = Topology::ring(n, kLink);
      const auto choice = fastest_algorithm(analytical, topology, kLink, spec);
      EXPECT_EQ(choice.algorithm, cheapest_algorithm(spec, kAlpha, kBeta));
      CollectiveSpec chosen = spec;
      chosen.algorithm = choice.algorithm;
      EXPECT_EQ(choice.seconds, closed_form_seconds(chosen, kAlpha, kBeta));
      sim::Engine engine;
      NetworkConfig config{.model = "analytical", .nominal = kLink};
      config.algorithms[CollectiveKind::AllReduce] = Algorithm::Auto;
      Network network(engine, topology, config);
      EXPECT_EQ(network.resolve(spec).algorithm, choice.algorithm);
      EXPECT_EQ(network.auto_decisions(), 0u);
    }
}

// A Network decides each collective shape once (training repeats its shapes every step),
// simulates nothing for a collective with one candidate (all-gather: the ring), and
// never overrides an algorithm the config or the spec names.
TEST(AutoAlgorithm, NetworkDecidesEachShapeOnceAndKeepsConfiguredAlgorithms) {
  const auto ring = Topology::ring(8, kLink);
  NetworkConfig config{.model = "flow", .nominal = kLink};
  for (auto& [kind, algorithm] : config.algorithms) algorithm = Algorithm::Auto;
  sim::Engine engine;
  Network network(engine, ring, config);
  const CollectiveSpec small{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = 1};
  const CollectiveSpec large{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = 1 << 24};
  for (int i = 0; i < 3; ++i) network.resolve(small);
  EXPECT_EQ(network.auto_decisions(), 1u);
  network.resolve(large);
  network.resolve(large);
  EXPECT_EQ(network.auto_decisions(), 2u);
  CollectiveSpec gather{.kind = CollectiveKind::AllGather, .ranks = 8};
  gather.block_elements.assign(8, 1000);
  EXPECT_EQ(network.resolve(gather).algorithm, Algorithm::Ring);
  EXPECT_EQ(network.auto_decisions(), 2u);
  CollectiveSpec named = large;
  named.algorithm = Algorithm::DoubleBinaryTree;
  EXPECT_EQ(network.resolve(named).algorithm, Algorithm::DoubleBinaryTree);

  // Configured halving-doubling stays, though the ring is faster here (the first test).
  NetworkConfig fixed{.model = "flow", .nominal = kLink};
  fixed.algorithms[CollectiveKind::AllReduce] = Algorithm::HalvingDoubling;
  Network configured(engine, ring, fixed);
  EXPECT_EQ(configured.resolve(large).algorithm, Algorithm::HalvingDoubling);
  EXPECT_EQ(configured.auto_decisions(), 0u);
}

// The models' table: every name is found, an unknown one is not (and the error lists
// the names), the analytical model runs collectives as closed forms over an uncontended
// transport, and Network and make_transport take their transports from the table.
TEST(NetworkModels, TableNamesEveryModel) {
  EXPECT_EQ(network_models(), (std::vector<std::string>{"analytical", "alpha_beta", "flow", "nccl"}));
  EXPECT_EQ(network_model_names(", ", " or "), "analytical, alpha_beta, flow or nccl");
  for (const auto& m : network_model_table()) {
    ASSERT_EQ(find_network_model(m.name), &m);
    EXPECT_FALSE(m.description.empty());
    sim::Engine engine;
    EXPECT_NE(m.make_transport(engine, Topology::ring(4, kLink), {}), nullptr) << m.name;
  }
  EXPECT_EQ(find_network_model("packet"), nullptr);
  try {
    (void)network_model("packet");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "unknown network model \"packet\" (expected one of analytical, alpha_beta, flow, nccl)");
  }
  EXPECT_TRUE(network_model("analytical").closed_form_collectives);
  EXPECT_FALSE(network_model("alpha_beta").closed_form_collectives);
  sim::Engine engine;
  EXPECT_EQ(make_transport("analytical", engine, Topology::ring(4, kLink), {})->name(), "alpha_beta");
  EXPECT_EQ(make_transport("flow", engine, Topology::ring(4, kLink), {})->name(), "flow");
  EXPECT_THROW(make_transport("packet", engine, Topology::ring(4, kLink), {}), std::invalid_argument);
  const auto schedule = make_schedule({.kind = CollectiveKind::AllReduce, .algorithm = Algorithm::Ring, .ranks = 4,
                                       .elements = 1024});
  EXPECT_THROW(simulate("analytical", Topology::ring(4, kLink), schedule, std::vector<double>(4, 0.0)),
               std::invalid_argument);
  for (const char* model : {"analytical", "alpha_beta", "flow"}) {
    NetworkConfig config;
    config.model = model;
    config.nominal = kLink;
    Network network(engine, Topology::ring(4, kLink), config);
    EXPECT_EQ(&network.model(), find_network_model(model));
    EXPECT_EQ(network.transport().name(), model == std::string("flow") ? "flow" : "alpha_beta");
  }
}

// The exact shortcuts are the model entry's to allow: a network computes rings from their
// recurrence and replays collectives only where its model's entry says so and the config
// asks for it; the models without machine clocks that have neither would run every
// collective message by message. Today alpha_beta and flow allow both.
TEST(NetworkModels, ShortcutsAreTheModelEntrysToAllow) {
  sim::Engine engine;
  for (const auto& m : network_model_table()) {
    if (m.make_clock) continue;  // a described machine's (nccl): no /network/system here
    for (bool asked : {true, false}) {
      SCOPED_TRACE(fmt::format("{}, shortcuts asked {}", m.name, asked));
      NetworkConfig config;
      config.model = std::string(m.name);
      config.nominal = kLink;
      config.evaluate_rings = asked;
      config.reuse_collectives = asked;
      Network network(engine, Topology::ring(4, kLink), config);
      EXPECT_EQ(network.transport().shortcuts().evaluates_rings(), asked && m.rings_as_recurrence);
      EXPECT_EQ(network.reuse()->enabled(), asked && m.exact_collective_reuse);
      EXPECT_EQ(make_transport(config.model, engine, Topology::ring(4, kLink), {})->shortcuts().evaluates_rings(),
                m.rings_as_recurrence);
    }
  }
  EXPECT_TRUE(network_model("alpha_beta").rings_as_recurrence && network_model("alpha_beta").exact_collective_reuse);
  EXPECT_TRUE(network_model("flow").rings_as_recurrence && network_model("flow").exact_collective_reuse);
}

// The algorithms' table: names round-trip, the lists per collective and `auto`'s
// candidates are the ones dtsim always had, in the same order.
TEST(CollectiveAlgorithms, TableListsEveryAlgorithm) {
  EXPECT_EQ(algorithm_names(", ", " or "), "auto, ring, halving_doubling, tree, direct, ps or binomial");
  for (const auto& a : collective_algorithms()) {
    EXPECT_EQ(parse_algorithm(a.name), a.id);
    EXPECT_STREQ(to_string(a.id), a.name);
    EXPECT_EQ(&collective_algorithm(a.id), &a);
  }
  try {
    (void)parse_algorithm("bruck");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "unknown collective algorithm \"bruck\" (expected one of: auto, ring, "
                                     "halving_doubling, tree, direct, ps, binomial)");
  }
  using A = Algorithm;
  EXPECT_EQ(algorithms_for(CollectiveKind::AllReduce),
            (std::vector<A>{A::Ring, A::HalvingDoubling, A::DoubleBinaryTree, A::Direct, A::ParameterServer}));
  EXPECT_EQ(algorithms_for(CollectiveKind::ReduceScatter), (std::vector<A>{A::Ring, A::Direct}));
  EXPECT_EQ(algorithms_for(CollectiveKind::AllGather), (std::vector<A>{A::Ring, A::Direct}));
  EXPECT_EQ(algorithms_for(CollectiveKind::Broadcast), (std::vector<A>{A::Binomial}));
  std::vector<A> candidates;
  for (const auto& a : collective_algorithms())
    if (a.auto_candidate) candidates.push_back(a.id);
  EXPECT_EQ(candidates, (std::vector<A>{A::Ring, A::HalvingDoubling, A::DoubleBinaryTree, A::Binomial}));
  EXPECT_THROW(make_schedule({.kind = CollectiveKind::Broadcast, .algorithm = A::Ring, .ranks = 4}),
               std::invalid_argument);
}

TEST(Topology, RingNeighboursAndHops) {
  auto ring = Topology::ring(8, kLink);
  EXPECT_EQ(ring.neighbors(0), (std::vector<int>{1, 7}));
  EXPECT_EQ(ring.neighbors(5), (std::vector<int>{4, 6}));
  EXPECT_EQ(ring.hops(1, 6), 3);
  EXPECT_EQ(Topology::ring(2).neighbors(0), (std::vector<int>{1}));
  EXPECT_TRUE(Topology::ring(1).neighbors(0).empty());
}

// Routes and gossip neighbours of every kind, from their definitions.
TEST(Topology, KindsHaveTheirShapes) {
  auto torus = Topology::torus({4, 8}, kLink);
  EXPECT_EQ(torus.neighbors(0), (std::vector<int>{1, 7, 8, 24}));
  EXPECT_EQ(torus.hops(0, 8 * 2 + 4), 2 + 4);
  auto torus3 = Topology::torus({2, 2, 2}, kLink);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(torus3.neighbors(r).size(), 3u);  // size-2 dimensions: one link each
  auto cube = Topology::hypercube(16, kLink);
  EXPECT_EQ(cube.neighbors(5), (std::vector<int>{1, 4, 7, 13}));
  EXPECT_EQ(cube.hops(0, 15), 4);
  auto expo = Topology::exponential(16, kLink);
  EXPECT_EQ(expo.neighbors(0), (std::vector<int>{1, 2, 4, 8, 12, 14, 15}));
  auto star = Topology::star(5, kLink);
  EXPECT_EQ(star.neighbors(2), (std::vector<int>{0, 1, 3, 4}));  // everyone, through the switch
  EXPECT_EQ(star.hops(0, 4), 2);
  auto tree = Topology::fat_tree(16, 4, kLink);  // 4-ary: 16 hosts, 2 per edge switch
  EXPECT_EQ(tree.hops(0, 1), 2);   // same edge switch
  EXPECT_EQ(tree.hops(0, 2), 4);   // same pod
  EXPECT_EQ(tree.hops(0, 15), 6);  // other pod, through a core switch
  EXPECT_EQ(tree.nodes(), 16 + 8 + 8 + 4);
  auto dgx = Topology::hierarchical(16, 8, true, {1e-6, 300e9}, kLink);
  EXPECT_EQ(dgx.hops(0, 7), 2);
  EXPECT_EQ(dgx.hops(0, 8), 4);
  EXPECT_DOUBLE_EQ(dgx.route_bandwidth(0, 7), 300e9);
  EXPECT_DOUBLE_EQ(dgx.route_bandwidth(0, 8), kBeta);
  auto direct = Topology::hierarchical(16, 8, false, {1e-6, 300e9}, kLink);
  EXPECT_EQ(direct.hops(0, 7), 1);
  EXPECT_EQ(direct.hops(0, 8), 2);
  EXPECT_THROW(Topology::fat_tree(17, 4, kLink), std::invalid_argument);
  EXPECT_THROW(Topology::hypercube(6, kLink), std::invalid_argument);
}

// Routing tie-break: among shortest paths the BFS visits lower node ids first.
TEST(Topology, DeterministicShortestPathTieBreak) {
  auto torus = Topology::torus({4, 4}, kLink);
  // 0 -> 5 has two 2-hop paths, via 1 and via 4; the route goes via 1.
  const auto& route = torus.route(0, 5);
  ASSERT_EQ(route.size(), 2u);
  EXPECT_EQ(torus.links()[route[0]].dst, 1);
}

// Metropolis-Hastings weights: 1/3 on a ring (the reference's), symmetric and doubly
// stochastic on every topology; uniform weights are 1/(degree+1).
TEST(Topology, MixingMatrices) {
  auto ring = Topology::ring(8);
  for (int j : {0, 1, 7}) EXPECT_DOUBLE_EQ(ring.mixing_row(0)[j], 1.0 / 3.0);
  for (const auto& topo : {Topology::ring(2), Topology::ring(5), Topology::torus({3, 4}), Topology::star(6),
                           Topology::exponential(12), Topology::fat_tree(8, 4)}) {
    const int n = topo.size();
    for (int i = 0; i < n; ++i) {
      const auto row = topo.mixing_row(i);
      EXPECT_NEAR(std::accumulate(row.begin(), row.end(), 0.0), 1.0, 1e-15) << topo.kind();
      for (int j = 0; j < n; ++j) EXPECT_DOUBLE_EQ(row[j], topo.mixing_row(j)[i]) << topo.kind();
    }
  }
  EXPECT_DOUBLE_EQ(Topology::torus({4, 4}).mixing_row(0, Mixing::Uniform)[1], 1.0 / 5.0);
}

// Spectral gap of the ring's mixing matrix, from lambda_2 = (1 + 2 cos(2 pi / n)) / 3:
// 0.1953 for n = 8 and 0.0507 for n = 16; 1 for the complete graph (W = J/n).
TEST(Topology, SpectralGap) {
  EXPECT_NEAR(Topology::ring(8).spectral_gap(), 1.0 - (1.0 + 2.0 * std::cos(2 * M_PI / 8)) / 3.0, 1e-12);
  EXPECT_NEAR(Topology::ring(8).spectral_gap(), 0.1953, 5e-5);
  EXPECT_NEAR(Topology::ring(16).spectral_gap(), 0.0507, 5e-5);
  EXPECT_NEAR(Topology::complete(7).spectral_gap(), 1.0, 1e-12);
}

TEST(Topology, UnknownKindNamesTheChoices) {
  try {
    parse_topology("moebius");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected ring, complete"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_topology(parse_topology("torus:3x3"), 8, kLink), std::invalid_argument);
}

// Each topology kind's entry states its shape without building it (the resource
// estimate's input): the nodes, cables and the largest gossip degree of the topology the
// same spec builds; for the exponential graph an upper bound.
TEST(TopologyKinds, ShapeIsWhatTheBuilderBuilds) {
  const std::vector<std::pair<std::string, int>> cases{
      {"ring", 8},        {"ring", 2},          {"complete", 7},   {"torus:4x4", 16},    {"torus:2x3", 6},
      {"hypercube", 16},  {"exponential", 12},  {"star", 6},       {"fat_tree:4", 12},   {"hierarchical:4", 8},
      {"hierarchical:4:direct", 8}};
  for (const auto& [text, ranks] : cases) {
    SCOPED_TRACE(fmt::format("{} with {} ranks", text, ranks));
    const auto spec = parse_topology(text);
    const auto shape = topology_shape(spec, ranks);
    const auto topology = make_topology(spec, ranks, kLink);
    const auto cables = static_cast<double>(topology.links().size()) / 2;
    std::size_t most = 0;
    for (int r = 0; r < ranks; ++r) most = std::max(most, topology.neighbors(r).size());
    const auto degree = static_cast<double>(most);
    EXPECT_EQ(shape.nodes, topology.nodes());
    if (spec.kind == "exponential") {  // each step's cables counted before the builder merges those that meet
      EXPECT_GE(shape.cables, cables);
      EXPECT_LE(shape.cables, 2 * cables);
      EXPECT_GE(shape.degree, degree);
      EXPECT_LE(shape.degree, 2 * degree);
    } else {
      EXPECT_EQ(shape.cables, cables);
      EXPECT_EQ(shape.degree, degree);
    }
  }
}

// The command line's short forms keep the limits of the scenario fields.
TEST(TopologyKinds, ShortFormsKeepTheFieldLimits) {
  EXPECT_THROW(parse_topology("fat_tree:3"), std::invalid_argument);
  EXPECT_THROW(parse_topology("fat_tree:258"), std::invalid_argument);
  EXPECT_EQ(parse_topology("fat_tree:8").k, 8);
  EXPECT_THROW(parse_topology("hierarchical:2000000"), std::invalid_argument);
  EXPECT_EQ(parse_topology("hierarchical:16").gpus_per_node, 16);
}

}  // namespace
}  // namespace dtsim::net
