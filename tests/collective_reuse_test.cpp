// Collective reuse (network_models/collective_reuse.hpp): a replayed collective finishes
// every rank at exactly the time the simulation would have, and reuse stays off for
// what could make them differ. Every test compares with the same run without reuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "network_models/collective_reuse.hpp"
#include "network_models/network.hpp"
#include "network_models/network_model.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {
namespace {

// One collective of a run: rank r arrives at start + offsets[r].
struct Job {
  double start;
  std::vector<double> offsets;
  std::int64_t elements = 1 << 18;  // 1 MiB of floats
};

struct Outcome {
  std::vector<std::vector<double>> done;  // per job, per rank
  std::vector<double> extra;              // arrival times of the extra messages
  ReuseStats stats;
  std::uint64_t traffic = 0;  // the last attempt's messages sent and rings' link claims (ExactShortcuts::traffic)
};

using Extra = std::function<void(sim::Engine&, Network&, std::vector<double>& arrivals)>;

// The models whose entries allow collective reuse (network_model.hpp): each must replay
// exactly what it would simulate, which the tests below check for every one of them.
std::vector<std::string> reusing_models() {
  std::vector<std::string> names;
  for (const auto& m : network_model_table())
    if (m.exact_collective_reuse) names.emplace_back(m.name);
  return names;
}

NetworkConfig config(const std::string& model) {
  NetworkConfig c;
  c.model = model;
  c.nominal = {5e-6, 1.25e9};
  return c;
}

// Runs `attempt` until it ends without a conflict, as the runner does; every rank must
// have finished.
void run_attempts(CollectiveReuse& reuse, const std::function<void()>& attempt, Outcome& out) {
  run_with_reuse(reuse, attempt);
  for (const auto& d : out.done)
    for (double t : d) EXPECT_GE(t, 0.0) << "a rank never finished";
  out.stats = reuse.stats();
}

// Runs the jobs (and `extra` traffic) on a fresh engine with time grid `grid` (none:
// plain doubles), as `cfg` says, through run_with_reuse, so that a conflict restarts the
// run. `on_grid`: the arrivals rounded to the grid, as every time a run computes is.
Outcome run_as(const Topology& topology, const NetworkConfig& cfg, const std::vector<Job>& jobs,
               const Extra& extra = {}, sim::TimeGrid grid = {}, bool on_grid = true) {
  auto shared = std::make_shared<CollectiveReuse>(cfg.reuse_collectives);
  Outcome out;
  auto attempt = [&] {
    out.done.assign(jobs.size(), std::vector<double>(static_cast<std::size_t>(topology.size()), -1.0));
    out.extra.clear();
    sim::Engine engine(grid);
    Network network(engine, topology, cfg, shared);
    std::vector<std::shared_ptr<Execution>> executions;
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      CollectiveSpec spec;
      spec.kind = CollectiveKind::AllReduce;
      spec.algorithm = Algorithm::Ring;
      spec.elements = jobs[k].elements;
      spec = network.resolve(spec);
      auto schedule = std::make_shared<const Schedule>(make_schedule(spec));
      auto exec = network.collective(spec, schedule, [&, k](int r) { out.done[k][r] = engine.now(); });
      for (int r = 0; r < topology.size(); ++r) {
        const double at = jobs[k].start + jobs[k].offsets[static_cast<std::size_t>(r)];
        engine.call_at(on_grid ? grid.round(at) : at, [exec, r] { exec->arrive(r); });
      }
      executions.push_back(exec);
    }
    if (extra) extra(engine, network, out.extra);
    engine.run();
    out.traffic = network.transport().shortcuts().traffic();
  };
  run_attempts(*shared, attempt, out);
  return out;
}

// With `reuse`: replayed where exact. Without: the reference, every message simulated
// (no ring computed from its recurrence either).
NetworkConfig with_reuse(NetworkConfig cfg, bool reuse) {
  cfg.reuse_collectives = reuse;
  if (!reuse) cfg.evaluate_rings = false;
  return cfg;
}

Outcome run(const Topology& topology, const NetworkConfig& cfg, const std::vector<Job>& jobs, bool reuse,
            const Extra& extra = {}, sim::TimeGrid grid = {}, bool on_grid = true) {
  return run_as(topology, with_reuse(cfg, reuse), jobs, extra, grid, on_grid);
}

// A spec's plan is built once and shared; its bytes are the schedule's, rank by rank.
TEST(NetworkPlans, OnePlanPerDistinctSpec) {
  sim::Engine engine;
  Network network(engine, Topology::ring(8, {5e-6, 1.25e9}), config("flow"));
  CollectiveSpec spec;
  spec.kind = CollectiveKind::AllReduce;
  spec.elements = 1000;  // not a multiple of 8: chunks of 125 and 126 elements
  spec = network.resolve(spec);
  const auto plan = network.plan(spec);
  EXPECT_EQ(network.plan(spec), plan);
  ASSERT_EQ(plan->bytes_sent.size(), 8u);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(plan->bytes_sent[static_cast<std::size_t>(r)], plan->schedule->bytes_sent(r));
  EXPECT_EQ(plan->shape, reuse_shape(spec));
  auto other = spec;
  other.elements = 1001;
  EXPECT_NE(network.plan(other), plan);
  EXPECT_NE(network.plan(other)->bytes_sent, plan->bytes_sent);
}

// One 1 MiB point-to-point message from `src` to `dst` sent at `at`; its arrival time is
// recorded.
Extra message_at(double at, int src, int dst) {
  return [=](sim::Engine& engine, Network& network, std::vector<double>& arrivals) {
    engine.call_at(at, [&, src, dst] { network.send(src, dst, 1 << 20, [&] { arrivals.push_back(engine.now()); }); });
  };
}

std::vector<double> offsets(int n, double spread) {
  std::vector<double> o;
  for (int r = 0; r < n; ++r) o.push_back(spread * ((r * 7) % 3));
  return o;
}

std::vector<Job> repeated(int n, int count, double first, double gap, double spread = 0.0) {
  std::vector<Job> jobs;
  for (int k = 0; k < count; ++k) jobs.push_back({first + gap * k, offsets(n, spread)});
  return jobs;
}

struct Case {
  std::string model;
  Topology topology;
};

// A ring and a torus under every model that replays.
std::vector<Case> cases() {
  std::vector<Case> all;
  for (const auto& model : reusing_models()) {
    all.push_back({model, Topology::ring(8, {5e-6, 1.25e9})});
    all.push_back({model, Topology::torus({4, 4}, {5e-6, 1.25e9})});
  }
  return all;
}

// The same collective six times, ranks arriving with the same offsets each time, in
// one binade of simulated time: the first is simulated and recorded, the other five
// replayed, and every rank's done time equals the simulation's bit for bit.
TEST(CollectiveReuse, RepeatedCollectivesReplayExactly) {
  for (const auto& c : cases()) {
    const int n = c.topology.size();
    for (double spread : {0.0, 3e-5}) {
      const auto jobs = repeated(n, 6, 1.0, 0.05, spread);
      const auto with = run(c.topology, config(c.model), jobs, true);
      const auto without = run(c.topology, config(c.model), jobs, false);
      SCOPED_TRACE(testing::Message() << c.model << " on " << n << " ranks, spread " << spread);
      EXPECT_EQ(with.done, without.done);
      EXPECT_EQ(with.stats.collectives, 6u);
      EXPECT_EQ(with.stats.recorded, 1u);
      EXPECT_EQ(with.stats.replayed, 5u);
      EXPECT_EQ(with.stats.restarts, 0u);
      EXPECT_EQ(without.stats.collectives, 0u);
      for (const auto& d : with.done)
        for (double t : d) EXPECT_GT(t, 1.0);
    }
  }
}

// Five collectives on 8 ranks around `boundary`: two before it, one across it (its first
// arrival 0.5 ms before it), two after.
std::vector<Job> around(double boundary) {
  std::vector<Job> jobs;
  for (double from : {-0.10, -0.05, -5e-4, 0.05, 0.10}) jobs.push_back({boundary + from, offsets(8, 0.0)});
  return jobs;
}

// Times in another binade round on another grid: a window that straddles 2 s is
// neither recorded nor replayed, and the first collective after it is recorded anew.
TEST(CollectiveReuse, WindowsAcrossAPowerOfTwoAreSimulated) {
  const auto topology = Topology::ring(8, {5e-6, 1.25e9});
  const auto jobs = around(2.0);
  for (const auto& model : reusing_models()) {
    const auto with = run(topology, config(model), jobs, true);
    const auto without = run(topology, config(model), jobs, false);
    EXPECT_EQ(with.done, without.done) << model;
    EXPECT_EQ(with.stats.recorded, 2u) << model;  // at 1.90 and 2.05
    EXPECT_EQ(with.stats.replayed, 2u) << model;  // at 1.95 and 2.10
    EXPECT_LT(without.done[2][0] - 2.0, 2e-3) << "the third collective must straddle 2 s";
    EXPECT_GT(without.done[2][0], 2.0);
  }
}

// On the time grid (sim/time_grid.hpp: every duration whole ticks of 2^-40 s) sums are
// exact wherever they lie below the horizon, so the same collectives as above replay
// across 2 s: one record, four replays, the same times as the simulation.
// Records and replays of around(boundary) on the grid, each run compared with the
// simulation, under both models.
void expect_on_the_grid(double boundary, sim::TimeGrid grid, std::uint64_t recorded, std::uint64_t replayed) {
  const auto topology = Topology::ring(8, {5e-6, 1.25e9});
  for (const auto& model : reusing_models()) {
    const auto with = run(topology, config(model), around(boundary), true, {}, grid);
    const auto without = run(topology, config(model), around(boundary), false, {}, grid);
    EXPECT_EQ(with.done, without.done) << model;
    EXPECT_EQ(with.stats.recorded, recorded) << model;
    EXPECT_EQ(with.stats.replayed, replayed) << model;
    EXPECT_GT(without.done[2][0], boundary) << "the third collective must straddle " << boundary << " s";
    for (const auto& d : with.done)
      for (double t : d) EXPECT_TRUE(grid.on_grid(t)) << t;
  }
}

TEST(CollectiveReuse, OnTheGridWindowsAcrossAPowerOfTwoReplay) {
  expect_on_the_grid(2.0, sim::TimeGrid::power_of_two(-40), 1, 4);
}

// The grid's horizon (2^53 ticks: 8 s with ticks of 2^-50 s) bounds it: beyond it
// durations add as plain doubles, so a window across it is simulated, and the binades
// beyond it are shift domains of their own.
TEST(CollectiveReuse, OnTheGridWindowsAcrossTheHorizonAreSimulated) {
  const auto grid = sim::TimeGrid::power_of_two(-50);
  ASSERT_EQ(grid.horizon(), 8.0);
  expect_on_the_grid(8.0, grid, 2, 2);  // recorded at 7.90 and 8.05, replayed at 7.95 and 8.10
}

// Arrivals off the grid (scheduled from outside, unrounded: nothing the simulation
// computes is) are not recorded: shifting them is not exact.
TEST(CollectiveReuse, ArrivalsOffTheGridAreNotRecorded) {
  const auto topology = Topology::ring(8, {5e-6, 1.25e9});
  const auto grid = sim::TimeGrid::power_of_two(-40);
  const auto jobs = repeated(8, 4, 1.0, 0.05, 3e-5);  // 1.05, 1.10, ...: not whole ticks of 2^-40 s
  ASSERT_FALSE(grid.on_grid(jobs[1].start));
  const auto with = run(topology, config("flow"), jobs, true, {}, grid, false);
  EXPECT_EQ(with.done, run(topology, config("flow"), jobs, false, {}, grid, false).done);
  EXPECT_EQ(with.stats.collectives, 4u);
  EXPECT_EQ(with.stats.recorded, 0u);
  EXPECT_EQ(with.stats.replayed, 0u);
}

// Other relative arrival times are another key: nothing to replay.
TEST(CollectiveReuse, OtherArrivalOffsetsAreSimulated) {
  const auto topology = Topology::torus({4, 4}, {5e-6, 1.25e9});
  std::vector<Job> jobs;
  for (int k = 0; k < 4; ++k) jobs.push_back({1.0 + 0.05 * k, offsets(16, 1e-5 * (k + 1))});
  const auto with = run(topology, config("flow"), jobs, true);
  EXPECT_EQ(with.done, run(topology, config("flow"), jobs, false).done);
  EXPECT_EQ(with.stats.recorded, 4u);
  EXPECT_EQ(with.stats.replayed, 0u);
}

// A message sent before the last rank arrives shares the links (flow model): that
// collective is simulated, the others replayed. With the rings computed from their
// recurrence (ring_wavefront.hpp), the message meets the third's held links instead:
// the run starts again with that shape simulated and not replayed, to the same figures.
TEST(CollectiveReuse, CrossTrafficBeforeTheLastArrivalIsSimulated) {
  const auto topology = Topology::ring(8, {5e-6, 1.25e9});
  const auto jobs = repeated(8, 4, 1.0, 0.05, 1e-4);
  const Extra extra = message_at(1.10 + 5e-5, 0, 1);  // between the third's first and last arrivals
  auto simulated_rings = config("flow");
  simulated_rings.evaluate_rings = false;
  const auto with = run(topology, simulated_rings, jobs, true, extra);
  const auto without = run(topology, simulated_rings, jobs, false, extra);
  EXPECT_EQ(with.done, without.done);
  EXPECT_EQ(with.extra, without.extra);
  ASSERT_EQ(with.extra.size(), 1u);
  EXPECT_EQ(with.stats.replayed, 2u);  // the second and the fourth
  EXPECT_EQ(with.stats.restarts, 0u);

  const auto computed = run(topology, config("flow"), jobs, true, extra);
  EXPECT_EQ(computed.done, without.done);
  EXPECT_EQ(computed.extra, without.extra);
  EXPECT_EQ(computed.stats.restarts, 1u);
  EXPECT_EQ(computed.stats.replayed, 0u);  // every job has the shape that met the message
}

// Rings computed on the flow model (ring_wavefront.hpp) hold their alone senders' links:
// a message that starts on one while the ring runs, or a second ring issued at once on
// the same links, restarts the run with the ring simulated, to the simulation's figures.
// A message on a link no sender of the ring uses meets nothing and changes nothing.
TEST(CollectiveReuse, TrafficOnAComputedRingsLinksRestartsTheRun) {
  const auto torus = Topology::torus({4, 4}, {5e-6, 1.25e9});
  const std::vector<Job> one{{1.0, offsets(16, 1e-5)}};
  const auto on_its_link = message_at(1.0 + 3e-4, 0, 1);  // rank 0's route to rank 1
  const auto with = run(torus, config("flow"), one, true, on_its_link);
  const auto without = run(torus, config("flow"), one, false, on_its_link);
  EXPECT_EQ(with.done, without.done);
  EXPECT_EQ(with.extra, without.extra);
  EXPECT_EQ(with.stats.restarts, 1u);

  const auto elsewhere = message_at(1.0 + 3e-4, 1, 0);  // the other direction: no sender's
  const auto beside = run(torus, config("flow"), one, true, elsewhere);
  EXPECT_EQ(beside.done, run(torus, config("flow"), one, false, elsewhere).done);
  EXPECT_EQ(beside.stats.restarts, 0u);

  std::vector<Job> two_at_once{{1.0, offsets(16, 1e-5)}, {1.0, offsets(16, 1e-5), 1 << 16}};
  const auto both = run(torus, config("flow"), two_at_once, true);
  EXPECT_EQ(both.done, run(torus, config("flow"), two_at_once, false).done);
  EXPECT_GE(both.stats.restarts, 1u);
}

// With replay off, a ring on the flow model is still computed from its recurrence (only
// its coupled senders' messages sent), and a conflict on its links still restarts the
// run, to the simulation's figures; nothing is recorded or replayed.
TEST(CollectiveReuse, RingsAreComputedWithReplayOff) {
  const auto torus = Topology::torus({4, 4}, {5e-6, 1.25e9});
  const std::vector<Job> one{{1.0, offsets(16, 1e-5)}};
  auto replay_off = config("flow");
  replay_off.reuse_collectives = false;
  ASSERT_TRUE(replay_off.evaluate_rings);

  const auto computed = run_as(torus, replay_off, one);
  const auto simulated = run(torus, config("flow"), one, false);
  EXPECT_EQ(computed.done, simulated.done);
  EXPECT_EQ(simulated.traffic, 16u * 2 * 15);  // every rank's 2 (n - 1) messages
  EXPECT_EQ(computed.traffic, 2u * 2 * 15 + 1);  // the 2 coupled senders', and the claim
  EXPECT_EQ(computed.stats.restarts, 0u);

  const auto on_its_link = message_at(1.0 + 3e-4, 0, 1);  // rank 0's route to rank 1
  const auto met = run_as(torus, replay_off, one, on_its_link);
  const auto met_simulated = run(torus, config("flow"), one, false, on_its_link);
  EXPECT_EQ(met.done, met_simulated.done);
  EXPECT_EQ(met.extra, met_simulated.extra);
  EXPECT_EQ(met.stats.restarts, 1u);
  EXPECT_EQ(met.traffic, met_simulated.traffic);  // the restart simulated the ring
  EXPECT_EQ(met.stats.collectives + met.stats.recorded + met.stats.replayed, 0u);
}

// Cross traffic inside a replayed window cannot be foreseen at the commit: under the
// flow model the run starts again with that collective's shape forbidden, and ends with
// the simulation's figures. Under the uncontended model messages never interact, so
// the replays stand.
TEST(CollectiveReuse, CrossTrafficAfterTheCommitRestartsTheRun) {
  const auto topology = Topology::ring(8, {5e-6, 1.25e9});
  const auto jobs = repeated(8, 4, 1.0, 0.05, 0.0);
  const Extra extra = message_at(1.10 + 2e-4, 2, 3);  // inside the third's replayed window
  const auto with = run(topology, config("flow"), jobs, true, extra);
  const auto without = run(topology, config("flow"), jobs, false, extra);
  EXPECT_EQ(with.done, without.done);
  EXPECT_EQ(with.extra, without.extra);
  EXPECT_EQ(with.stats.restarts, 1u);
  EXPECT_EQ(with.stats.replayed, 0u);  // the shape is forbidden after the conflict
  ASSERT_EQ(with.extra.size(), 1u);

  const auto ab = run(topology, config("alpha_beta"), jobs, true, extra);
  EXPECT_EQ(ab.done, run(topology, config("alpha_beta"), jobs, false, extra).done);
  EXPECT_EQ(ab.stats.restarts, 0u);
  EXPECT_EQ(ab.stats.replayed, 3u);
}

// Jitter draws one number per message: reuse would consume fewer. A bandwidth change
// inside a window: that collective is simulated, and the later ones (another network
// state) are recorded anew.
TEST(CollectiveReuse, JitterAndBandwidthChangesDisableIt) {
  const auto topology = Topology::ring(8, {5e-6, 1.25e9});
  const auto jobs = repeated(8, 5, 1.0, 0.05, 0.0);
  for (const auto& model : reusing_models()) {
    auto jittery = config(model);
    jittery.perturbations.jitter_s = 2e-6;
    jittery.perturbations.jitter_seed = 3;
    const auto j = run(topology, jittery, jobs, true);
    EXPECT_EQ(j.done, run(topology, jittery, jobs, false).done) << model;
    EXPECT_EQ(j.stats.replayed, 0u) << model;
    EXPECT_EQ(j.stats.collectives, 5u) << model;

    auto traced = config(model);
    traced.perturbations.bandwidth_trace = {{1.10 + 1e-4, 3, 4, 0.5e9}};
    const auto t = run(topology, traced, jobs, true);
    EXPECT_EQ(t.done, run(topology, traced, jobs, false).done) << model;
    EXPECT_EQ(t.stats.recorded, 2u) << model;  // before and after the change
    EXPECT_EQ(t.stats.replayed, 2u) << model;  // the second and the fifth
  }
}

// ---- Busy periods (busy_period.hpp) ----

// Steps of collectives as a data-parallel step issues them (SINGA's fused partitions):
// each rank enters partition k + 1 as soon as it is done with partition k, and the next
// step's first partition `gap` seconds after it is done with the last one. On a torus
// the ranks finish at different instants, so a step's partitions overlap on the network.
struct Chain {
  std::vector<std::int64_t> partitions;  // elements of each partition
  int steps = 8;
  double start = 1.0;
  double gap = 0.05;
  // Extra seconds before `rank` enters partition k of `step` (a straggler).
  std::function<double(int step, int k, int rank)> delay = [](int, int, int) { return 0.0; };
  std::map<int, std::vector<std::int64_t>> changed;  // steps with other partitions
  const std::vector<std::int64_t>& at(int step) const {
    const auto it = changed.find(step);
    return it == changed.end() ? partitions : it->second;
  }
};

Outcome run_chain(const Topology& topology, const NetworkConfig& reuse_on, const Chain& chain, bool reuse,
                  const Extra& extra = {}, sim::TimeGrid grid = {}) {
  const NetworkConfig cfg = with_reuse(reuse_on, reuse);
  auto shared = std::make_shared<CollectiveReuse>(reuse);
  const int n = topology.size();
  std::vector<std::size_t> first{0};  // out.done's index of each step's first partition
  for (int step = 0; step < chain.steps; ++step) first.push_back(first.back() + chain.at(step).size());
  Outcome out;
  auto attempt = [&] {
    out.done.assign(first.back(), std::vector<double>(static_cast<std::size_t>(n), -1.0));
    out.extra.clear();
    sim::Engine engine(grid);
    Network network(engine, topology, cfg, shared);
    std::vector<std::shared_ptr<Execution>> executions(out.done.size());
    std::function<void(int, int, int)> enter = [&](int step, int k, int rank) {
      const auto i = first[static_cast<std::size_t>(step)] + static_cast<std::size_t>(k);
      if (!executions[i]) {
        CollectiveSpec spec;
        spec.kind = CollectiveKind::AllReduce;
        spec.algorithm = Algorithm::Ring;
        spec.elements = chain.at(step)[static_cast<std::size_t>(k)];
        spec = network.resolve(spec);
        executions[i] = network.collective(spec, std::make_shared<const Schedule>(make_schedule(spec)),
                                           [&, step, k, i](int r) {
                                             out.done[i][r] = engine.now();
                                             const bool last = k + 1 == static_cast<int>(chain.at(step).size());
                                             if (last && step + 1 == chain.steps) return;
                                             const int next_step = last ? step + 1 : step, next_k = last ? 0 : k + 1;
                                             const double wait = (last ? chain.gap : 0.0) + chain.delay(next_step, next_k, r);
                                             if (wait == 0.0) enter(next_step, next_k, r);
                                             else engine.call_at(engine.after(wait), [&, next_step, next_k, r] { enter(next_step, next_k, r); });
                                           });
      }
      executions[i]->arrive(rank);
    };
    for (int r = 0; r < n; ++r)
      engine.call_at(grid.round(chain.start + chain.delay(0, 0, r)), [&, r] { enter(0, 0, r); });
    if (extra) extra(engine, network, out.extra);
    engine.run();
  };
  run_attempts(*shared, attempt, out);
  return out;
}

Chain three_partitions() {
  Chain c;
  c.partitions = {1 << 18, 3 << 16, 1 << 17};
  return c;
}

// On a torus under the flow model no partition runs alone, so no single collective is
// reused; whole steps are, as busy periods, and every rank's done time equals the
// simulation's bit for bit. On a ring (ranks done at one instant) and under the
// uncontended model the partitions are reused one by one, as before.
TEST(BusyPeriods, OverlappingCollectivesReplayAsOne) {
  const auto torus = Topology::torus({4, 4}, {5e-6, 1.25e9});
  const auto chain = three_partitions();
  const auto with = run_chain(torus, config("flow"), chain, true);
  const auto without = run_chain(torus, config("flow"), chain, false);
  EXPECT_EQ(with.done, without.done);
  EXPECT_EQ(with.stats.collectives, 24u);
  EXPECT_EQ(with.stats.recorded, 2u);  // the first step (all ranks at once) and the second (as later steps)
  EXPECT_EQ(with.stats.replayed, 18u);  // steps 3 to 8, three partitions each
  EXPECT_EQ(with.stats.restarts, 0u);
  // They do overlap: some rank enters partition 1 before another is done with partition 0.
  EXPECT_LT(*std::min_element(without.done[0].begin(), without.done[0].end()),
            *std::max_element(without.done[0].begin(), without.done[0].end()));

  for (const auto& [model, topology] : std::vector<std::pair<const char*, Topology>>{
           {"flow", Topology::ring(8, {5e-6, 1.25e9})}, {"alpha_beta", torus}}) {
    const auto w = run_chain(topology, config(model), chain, true);
    EXPECT_EQ(w.done, run_chain(topology, config(model), chain, false).done) << model;
    EXPECT_GT(w.stats.replayed, 12u) << model;
    EXPECT_EQ(w.stats.restarts, 0u) << model;
  }
}

// On a ring, a partition whose chunks differ by an element lets the ranks with the
// shorter ones finish and enter the next partition while the others' last messages still
// flow (a busy period of two), and that next partition, of equal chunks, ends at one
// instant: its last messages are delivered in the instant in which the first of its
// ranks enters the third partition. The period ends there and is kept, so every step
// after the first is replayed, the period and the third partition (kept alone: 7 replays
// when the period was dropped as the third partition started).
TEST(BusyPeriods, APeriodEndingAsTheNextCollectiveStartsIsKept) {
  const auto ring = Topology::ring(8, {5e-6, 1.25e9});
  Chain chain;
  chain.partitions = {(1 << 18) + 3, 1 << 17, 1 << 16};
  const auto with = run_chain(ring, config("flow"), chain, true);
  const auto without = run_chain(ring, config("flow"), chain, false);
  EXPECT_EQ(with.done, without.done);
  // The first partition's ranks finish apart, the second's at one instant.
  const auto& first = without.done[0];
  const auto& second = without.done[1];
  ASSERT_LT(*std::min_element(first.begin(), first.end()), *std::max_element(first.begin(), first.end()));
  ASSERT_EQ(*std::min_element(second.begin(), second.end()), *std::max_element(second.begin(), second.end()));
  EXPECT_EQ(with.stats.replayed, 21u);  // steps 2 to 8 (entered as the first: all ranks at once), three partitions each
  EXPECT_EQ(with.stats.restarts, 0u);
}

// A period that straddles a power of two is neither recorded nor replayed.
TEST(BusyPeriods, PeriodsAcrossAPowerOfTwoAreSimulated) {
  const auto torus = Topology::torus({4, 4}, {5e-6, 1.25e9});
  auto chain = three_partitions();
  chain.start = 1.824;  // steps about 58 ms apart: the fourth starts just before 2 s
  const auto with = run_chain(torus, config("flow"), chain, true);
  const auto without = run_chain(torus, config("flow"), chain, false);
  EXPECT_EQ(with.done, without.done);
  EXPECT_EQ(with.stats.restarts, 0u);
  ASSERT_LT(*std::max_element(without.done[8].begin(), without.done[8].end()) + chain.gap, 2.0);
  ASSERT_GT(*std::min_element(without.done[11].begin(), without.done[11].end()), 2.0);
  // Binade 0: steps 1 and 2 recorded, 3 replayed; step 4 (across 2 s) simulated, its
  // ranks done in binade 1; step 5 (entered at times computed there) recorded, 6 to 8
  // replayed.
  EXPECT_EQ(with.stats.recorded, 3u);
  EXPECT_EQ(with.stats.replayed, 12u);
}

// On the time grid the same steps replay across 2 s: the first step (all ranks at once)
// and the second (entered as every later one is) recorded, steps 3 to 8 replayed, where
// plain doubles simulate four of the eight.
TEST(BusyPeriods, OnTheGridPeriodsAcrossAPowerOfTwoReplay) {
  const auto torus = Topology::torus({4, 4}, {5e-6, 1.25e9});
  const auto grid = sim::TimeGrid::power_of_two(-40);
  auto chain = three_partitions();
  chain.start = 1.824;
  const auto with = run_chain(torus, config("flow"), chain, true, {}, grid);
  const auto without = run_chain(torus, config("flow"), chain, false, {}, grid);
  EXPECT_EQ(with.done, without.done);
  ASSERT_LT(*std::max_element(without.done[8].begin(), without.done[8].end()) + chain.gap, 2.0);
  ASSERT_GT(*std::min_element(without.done[11].begin(), without.done[11].end()), 2.0);
  EXPECT_EQ(with.stats.recorded, 2u);
  EXPECT_EQ(with.stats.replayed, 18u);
  EXPECT_EQ(with.stats.restarts, 0u);
}

// What the record cannot foresee, in a replayed period: a straggler entering a later
// partition late (by a microsecond, or by much), another size of a later partition, a
// partition never entered, or cross traffic. Each is a conflict: the run starts again
// with the head's shape forbidden (so nothing is replayed), and its figures are the
// simulation's.
TEST(BusyPeriods, ConflictsInAReplayedPeriodRestartTheRun) {
  const auto torus = Topology::torus({4, 4}, {5e-6, 1.25e9});
  std::vector<Chain> chains(5, three_partitions());
  chains[0].delay = [](int step, int k, int rank) { return step == 5 && k == 2 && rank == 6 ? 1e-6 : 0.0; };
  chains[1].delay = [](int step, int k, int rank) { return step == 5 && k == 1 && rank == 3 ? 2e-4 : 0.0; };
  chains[2].changed[5] = {1 << 18, 1 << 16, 1 << 17};
  chains[3].changed[5] = {1 << 18, 3 << 16};
  chains[4].steps = 6;  // the last step without its last partition
  chains[4].changed[5] = {1 << 18, 3 << 16};
  for (std::size_t c = 0; c < chains.size(); ++c) {
    const auto with = run_chain(torus, config("flow"), chains[c], true);
    EXPECT_EQ(with.done, run_chain(torus, config("flow"), chains[c], false).done) << c;
    EXPECT_EQ(with.stats.restarts, 1u) << c;
    EXPECT_EQ(with.stats.replayed, 0u) << c;
  }
  const auto chain = three_partitions();
  const double inside = run_chain(torus, config("flow"), chain, false).done[5 * 3][0];  // step 5, partition 0, rank 0 done
  const Extra extra = message_at(inside, 2, 3);
  const auto with = run_chain(torus, config("flow"), chain, true, extra);
  const auto without = run_chain(torus, config("flow"), chain, false, extra);
  EXPECT_EQ(with.done, without.done);
  EXPECT_EQ(with.extra, without.extra);
  EXPECT_EQ(with.stats.restarts, 1u);
}

// A sum that falls exactly halfway between two doubles rounds to the even one, so a
// window shifted by an odd number of its binade's steps can round differently. Here
// (times near 2^-11 s, 12,345 floats on two ranks) the first arrival's shift by one
// step changes a done time: that collective is simulated and recorded by its last
// mantissa bit, and each later one replays the record of its own bit.
TEST(CollectiveReuse, RoundingTiesReplayOnlyAnEvenShift) {
  const auto topology = Topology::ring(2, {5e-6, 1.25e9});
  const double first = 0x1p-11, step = 0x1p-63;  // the spacing of doubles in [2^-11, 2^-10)
  const double gap = 0x1p-15;                       // an even number of steps
  std::vector<Job> jobs;
  for (double start : {first, first + gap + step, first + 2 * gap, first + 3 * gap + step})
    jobs.push_back({start, {0.0, 0.0}, 12345});
  const auto with = run(topology, config("alpha_beta"), jobs, true);
  const auto without = run(topology, config("alpha_beta"), jobs, false);
  EXPECT_EQ(with.done, without.done);
  ASSERT_NE(without.done[1][0] - jobs[1].start, without.done[0][0] - jobs[0].start)
      << "the odd shift must round a tie the other way, or this test shows nothing";
  EXPECT_EQ(without.done[2][0] - jobs[2].start, without.done[0][0] - jobs[0].start);
  EXPECT_EQ(with.stats.recorded, 2u);  // the first two, one per last bit
  EXPECT_EQ(with.stats.replayed, 2u);
  for (const auto& d : with.done) EXPECT_EQ(std::ilogb(d[0]), -11);
}


// Busy periods and ties: with links of 2^-20 + 2^-40 s, every message's start at
// 8,192 to 16,384 s (doubles 2^-39 apart) is a sum exactly halfway between two doubles,
// and the steps enter one, two or no steps of 2^-39 s late, so their heads' last
// mantissa bits differ. A period replayed at the other bit would finish ranks off by a
// step (it does when periods are keyed without the bit); keyed by it, four are recorded.
TEST(BusyPeriods, RoundingTiesReplayOnlyAnEvenShift) {
  const auto torus = Topology::torus({4, 4}, {0x1p-20 + 0x1p-40, 1.25e9});
  Chain chain = three_partitions();
  chain.start = 8192.0;
  chain.gap = 0.0123;
  chain.delay = [](int step, int k, int) { return k == 0 ? (step % 3) * 0x1p-39 : 0.0; };
  const auto with = run_chain(torus, config("flow"), chain, true);
  const auto without = run_chain(torus, config("flow"), chain, false);
  EXPECT_EQ(with.done, without.done);
  EXPECT_EQ(with.stats.recorded, 4u);
  EXPECT_EQ(with.stats.replayed, 12u);
  EXPECT_EQ(with.stats.restarts, 0u);
}

}  // namespace
}  // namespace dtsim::net
