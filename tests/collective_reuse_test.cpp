// Collective reuse (network_models/collective_reuse.hpp): a replayed collective finishes
// every rank at exactly the time the simulation would have, and reuse stays off for
// what could make them differ. Every test compares with the same run without reuse.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "network_models/collective_reuse.hpp"
#include "network_models/network.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology.hpp"

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
};

using Extra = std::function<void(sim::Engine&, Network&, std::vector<double>& arrivals)>;

NetworkConfig config(const std::string& model) {
  NetworkConfig c;
  c.model = model;
  c.nominal = {5e-6, 1.25e9};
  return c;
}

// Runs the jobs (and `extra` traffic) on a fresh engine; with `reuse`, through
// run_with_reuse, so that a conflict restarts the run.
Outcome run(const Topology& topology, NetworkConfig cfg, const std::vector<Job>& jobs, bool reuse,
            const Extra& extra = {}) {
  cfg.reuse_collectives = reuse;
  auto shared = std::make_shared<CollectiveReuse>(reuse);
  Outcome out;
  auto attempt = [&] {
    out.done.assign(jobs.size(), std::vector<double>(static_cast<std::size_t>(topology.size()), -1.0));
    out.extra.clear();
    sim::Engine engine;
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
      for (int r = 0; r < topology.size(); ++r)
        engine.call_at(jobs[k].start + jobs[k].offsets[static_cast<std::size_t>(r)], [exec, r] { exec->arrive(r); });
      executions.push_back(exec);
    }
    if (extra) extra(engine, network, out.extra);
    engine.run();
  };
  run_with_reuse(*shared, attempt);
  for (const auto& d : out.done)
    for (double t : d) EXPECT_GE(t, 0.0) << "a rank never finished";
  out.stats = shared->stats();
  return out;
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
  const char* model;
  Topology topology;
};

std::vector<Case> cases() {
  return {{"alpha_beta", Topology::ring(8, {5e-6, 1.25e9})},
          {"flow", Topology::ring(8, {5e-6, 1.25e9})},
          {"flow", Topology::torus({4, 4}, {5e-6, 1.25e9})},
          {"alpha_beta", Topology::torus({4, 4}, {5e-6, 1.25e9})}};
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

// Times in another binade round on another grid: a window that straddles 2 s is
// neither recorded nor replayed, and the first collective after it is recorded anew.
TEST(CollectiveReuse, WindowsAcrossAPowerOfTwoAreSimulated) {
  const auto topology = Topology::ring(8, {5e-6, 1.25e9});
  std::vector<Job> jobs;
  for (double start : {1.90, 1.95, 2.0 - 5e-4, 2.05, 2.10}) jobs.push_back({start, offsets(8, 0.0)});
  for (const char* model : {"alpha_beta", "flow"}) {
    const auto with = run(topology, config(model), jobs, true);
    const auto without = run(topology, config(model), jobs, false);
    EXPECT_EQ(with.done, without.done) << model;
    EXPECT_EQ(with.stats.recorded, 2u) << model;  // at 1.90 and 2.05
    EXPECT_EQ(with.stats.replayed, 2u) << model;  // at 1.95 and 2.10
    EXPECT_LT(without.done[2][0] - 2.0, 2e-3) << "the third collective must straddle 2 s";
    EXPECT_GT(without.done[2][0], 2.0);
  }
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
// collective is simulated, the others replayed.
TEST(CollectiveReuse, CrossTrafficBeforeTheLastArrivalIsSimulated) {
  const auto topology = Topology::ring(8, {5e-6, 1.25e9});
  const auto jobs = repeated(8, 4, 1.0, 0.05, 1e-4);
  const Extra extra = message_at(1.10 + 5e-5, 0, 1);  // between the third's first and last arrivals
  const auto with = run(topology, config("flow"), jobs, true, extra);
  const auto without = run(topology, config("flow"), jobs, false, extra);
  EXPECT_EQ(with.done, without.done);
  EXPECT_EQ(with.extra, without.extra);
  ASSERT_EQ(with.extra.size(), 1u);
  EXPECT_EQ(with.stats.replayed, 2u);  // the second and the fourth
  EXPECT_EQ(with.stats.restarts, 0u);
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
  for (const char* model : {"alpha_beta", "flow"}) {
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

}  // namespace
}  // namespace dtsim::net
