// The timing-only mode: rank 0 runs the kernels against a RepresentativeCommunicator,
// every rank replays its OpTrace with size-only tensors. On scenarios where every rank
// does the same work with the same payload sizes, the replay must give exactly the full
// emulated run's times, bits, traffic and phases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include <fmt/format.h>


#include "comm/emulated.hpp"
#include "comm/representative.hpp"
#include "comm/trace_replay.hpp"
#include "network_models/closed_form.hpp"
#include "network_models/network.hpp"
#include "runner/run.hpp"
#include "sim/engine.hpp"
#include "scenario_cases.hpp"
#include "test_util.hpp"

namespace dtsim {
namespace {

using nlohmann::json;

using testing::logistic;
using testing::resnet20;
using testing::scenario;
using testing::symmetric_cases;

// Every timing figure of the timing-only run equals the full emulated run's, bit for bit
// (the replay sums and averages in the same order).
TEST(TimingOnly, EqualsTheFullEmulatedRunOnSymmetricScenarios) {
  for (const auto& c : symmetric_cases()) {
    SCOPED_TRACE(c.name);
    auto s = runner::parse_scenario(c.doc);
    const auto full = runner::run_emulated(s);
    s.timing_only = true;
    const auto timed = runner::run_emulated(s);
    EXPECT_TRUE(timed.timing_only);
    testing::expect_same_timing(timed, full);
    EXPECT_EQ(timed.n_bits, full.n_bits);
    EXPECT_EQ(timed.algorithm_state_bytes, full.algorithm_state_bytes);
    EXPECT_GT(timed.mean_step_time_s(), 0.0);
  }
}

// A straggler slows every rank that waits for it: the replay applies each rank's own
// slowdown to the representative's compute times (rank 0 is not the straggler here).
TEST(TimingOnly, StragglerSlowdownAppliesPerRank) {
  auto doc = symmetric_cases().front().doc;
  auto s = runner::parse_scenario(doc);
  s.timing_only = true;
  const auto slowed = runner::run_emulated(s);
  s.compute.slowdown.clear();
  const auto even = runner::run_emulated(s);
  EXPECT_GT(slowed.mean_step_time_s(), even.mean_step_time_s());
  // Mean compute over 6 ranks: five at 1x, one at 3.5x.
  EXPECT_NEAR(slowed.mean_compute_time_s(), even.mean_compute_time_s() * (5 + 3.5) / 6, 1e-15);
}

// The result says what it is: no loss, accuracy or consensus figures (JSON null), the
// representative rank named, the table marked.
TEST(TimingOnly, ReportsNoLossAndNamesTheRepresentative) {
  auto s = runner::parse_scenario(symmetric_cases().front().doc);
  s.timing_only = true;
  const auto r = runner::run_emulated(s);
  const json j = r.to_json();
  EXPECT_EQ(j["timing_only"], (json{{"representative_rank", 0}}));
  EXPECT_TRUE(j["final"]["train_loss"].is_null());
  EXPECT_TRUE(j["final"]["train_accuracy"].is_null());
  EXPECT_TRUE(j["final"]["consensus_distance"].is_null());
  EXPECT_TRUE(j["eval"][0]["train_loss"].is_null());
  EXPECT_TRUE(j["per_step"]["loss"][0].is_null());
  EXPECT_TRUE(j["diverged_at_step"].is_null());
  EXPECT_EQ(j["scenario"]["timing_only"], true);
  s.timing_only = false;
  EXPECT_EQ(runner::run_emulated(s).to_json()["timing_only"], false);
}

// One rank stands for all only if every rank has as many gossip neighbours: on a path
// 0-1-2-3 a gossiping algorithm is refused, naming the ranks; an all-reduce algorithm
// (no neighbour messages) runs, and equals the full run.
TEST(TimingOnly, IrregularGossipGraphIsRefused) {
  json edges = json::array();
  for (int i = 0; i < 3; ++i) edges.push_back({{"a", i}, {"b", i + 1}, {"latency_us", 2}, {"bandwidth_GBps", 4}});
  const json path = {{"kind", "edges"}, {"edges", edges}};
  auto gossip = runner::parse_scenario(
      scenario(4, logistic(), {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.1}}, path));
  gossip.timing_only = true;
  try {
    runner::run_emulated(gossip);
    FAIL() << "expected an error";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/timing_only");
    EXPECT_NE(std::string(e.what()).find("rank 1 has 2 gossip neighbours and rank 0 has 1"), std::string::npos)
        << e.what();
  }
  auto central = runner::parse_scenario(
      scenario(4, logistic(), {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}}, path));
  const auto full = runner::run_emulated(central);
  central.timing_only = true;
  EXPECT_EQ(runner::run_emulated(central).step_time_s, full.step_time_s);
}

// 1-bit Adam's phase 1 sends to every chunk's server, not to ring neighbours: its entry says
// one rank's trace cannot stand for the others, and the run stops before it starts.
// 1-bit Adam's compressed phase sends to every rank, not only rank 0's ring neighbours, so
// rank 0's trace cannot stand for the others: the scenario is refused when it is loaded
// (before a sweep runs any point), and runs in full without timing_only.
TEST(TimingOnly, AlgorithmThatSendsBeyondItsNeighboursIsRefused) {
  auto doc = scenario(4, logistic(), {{"name", "one_bit_adam"}, {"lr", 0.01}, {"freeze_step", 1}}, {{"kind", "ring"}});
  doc["timing_only"] = true;
  try {
    runner::parse_scenario(doc);
    FAIL() << "expected an error";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/timing_only");
    EXPECT_NE(std::string(e.what()).find("one_bit_adam sends to ranks that are not topology neighbours"), std::string::npos)
        << e.what();
  }
  doc["timing_only"] = false;
  const auto full = runner::run_emulated(runner::parse_scenario(doc));
  EXPECT_GT(full.mean_step_time_s(), 0.0);
}

// The representative's collectives return what they would if every rank held its data.
TEST(RepresentativeCommunicator, MirrorsEveryRankAndRecordsTheTrace) {
  comm::ComputeTiming timing;
  timing.model = {.flops_per_s = 1e9, .bytes_per_s = 1e9};
  comm::RepresentativeCommunicator rep(0, 8, {1, 7}, timing);
  auto run = [&]() -> sim::Task<void> {
    at::Tensor x = at::arange(4, at::kFloat);
    co_await rep.all_reduce(x, comm::ReduceOp::Sum);
    EXPECT_TRUE(x.equal(at::arange(4, at::kFloat) * 8));
    co_await rep.all_reduce(x, comm::ReduceOp::Average);
    EXPECT_TRUE(x.equal(at::arange(4, at::kFloat) * 8));
    std::vector<at::Tensor> gathered;
    const at::Tensor ones = at::ones({3}, at::kInt);
    co_await rep.all_gather(ones, gathered);
    EXPECT_EQ(gathered.size(), 8u);
    for (const auto& g : gathered) EXPECT_TRUE(g.equal(at::ones({3}, at::kInt)));
    std::vector<at::Tensor> received;
    const std::vector<int> peers{7, 1};
    const at::Tensor payload = at::full({5}, 2.5);
    auto op = rep.exchange(payload, peers, received);
    const sim::ComputeCost cost{.flops = 2e6, .bytes = 1e6};  // 3 ms
    co_await rep.compute(cost, [] {});
    co_await op;
    EXPECT_EQ(received.size(), 2u);
    EXPECT_TRUE(received.size() == 2 && received[1].equal(at::full({5}, 2.5)));
    EXPECT_DOUBLE_EQ(rep.now(), 3e-3);
    rep.mark(comm::TraceMark::End);
    co_await rep.all_reduce(x, comm::ReduceOp::Sum);  // after End: not recorded
  };
  sim::run_blocking(run());

  using Kind = comm::TracedOp::Kind;
  const auto& ops = rep.trace().ops;
  const std::vector<Kind> kinds{Kind::AllReduce, Kind::Wait,    Kind::AllReduce, Kind::Wait, Kind::AllGather, Kind::Wait,
                                Kind::Exchange,  Kind::Compute, Kind::Wait,      Kind::Wait, Kind::Mark};
  ASSERT_EQ(ops.size(), kinds.size());
  for (std::size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ(ops[i].kind, kinds[i]) << i;
  EXPECT_EQ(ops[4].dtype, at::kInt);
  EXPECT_EQ(ops[4].numel, 3);
  EXPECT_EQ(ops[6].peer_slots, (std::vector<int>{1, 0}));  // rank 7 is neighbour #2
  EXPECT_EQ(ops[8].op, 4u);                                // the compute (operation #4) is awaited first
  EXPECT_EQ(ops[9].op, 3u);                                // then the exchange
  EXPECT_DOUBLE_EQ(ops[7].seconds, 3e-3);

  // A peer that is not a gossip neighbour, or a receive with nothing sent, cannot be mirrored.
  std::vector<at::Tensor> out;
  const int stranger[] = {4};
  EXPECT_THROW((void)rep.exchange(at::ones({1}), stranger, out), std::invalid_argument);
  at::Tensor buf = at::zeros({2});
  EXPECT_THROW((void)rep.recv(buf, 1), std::invalid_argument);
  (void)rep.send(at::full({2}, 4.0), 1);
  (void)rep.recv(buf, 1);
  EXPECT_TRUE(buf.equal(at::full({2}, 4.0)));
}

// Replays `trace` on every rank of an n-rank ring (alpha_beta, 5 us, 1 GB/s, ring
// all-reduces): each rank's record.
std::vector<comm::ReplayRecord> replay_on_ring(const comm::OpTrace& trace, int n) {
  sim::Engine engine;
  net::NetworkConfig config;
  config.model = "alpha_beta";
  config.nominal = {.latency_s = 5e-6, .bandwidth_bytes_per_s = 1e9};
  config.algorithms[net::CollectiveKind::AllReduce] = net::Algorithm::Ring;
  auto network = std::make_shared<net::Network>(engine, net::Topology::ring(n, config.nominal), config);
  comm::ComputeTiming timing;
  timing.model = comm::replay_compute_model();
  comm::EmulatedWorld world(engine, network, timing);
  std::vector<comm::ReplayRecord> records(n);
  std::vector<std::unique_ptr<comm::PhaseTimer>> timers;
  auto replay = [](comm::Communicator& c, const comm::OpTrace& t, std::vector<int> nb, comm::PhaseTimer& timer,
                   comm::ReplayRecord& out) -> sim::Task<void> {
    out = co_await comm::replay_trace(c, t, std::move(nb), timer);
  };
  for (int r = 0; r < n; ++r) {
    timers.push_back(std::make_unique<comm::PhaseTimer>(world.communicator(r)));
    engine.spawn(replay(world.communicator(r), trace, network->topology().neighbors(r), *timers.back(), records[r]),
                 "rank " + std::to_string(r));
  }
  engine.run();
  return records;
}

comm::TracedOp mark(comm::TraceMark m) { return {.kind = comm::TracedOp::Kind::Mark, .variant = static_cast<int>(m)}; }

// A replayed trace on a ring: compute 2 ms, then a 1 MB ring all-reduce: the step takes
// 2 ms plus the closed form of the ring all-reduce.
TEST(TraceReplay, ComputeThenAllReduceTakesTheClosedForm) {
  const int n = 8;
  comm::OpTrace trace;
  trace.ranks = n;
  auto push = [&](comm::TracedOp op) { trace.ops.push_back(std::move(op)); };
  push(mark(comm::TraceMark::StepBegin));
  push({.kind = comm::TracedOp::Kind::Compute, .seconds = 2e-3});
  push({.kind = comm::TracedOp::Kind::Wait, .op = 0});
  push({.kind = comm::TracedOp::Kind::AllReduce, .numel = 1 << 18});  // 1 MiB of fp32
  push({.kind = comm::TracedOp::Kind::Wait, .op = 1});
  push(mark(comm::TraceMark::StepEnd));
  trace.operations = 2;

  const auto records = replay_on_ring(trace, n);
  const double ring = net::closed_form_seconds(
      {.kind = net::CollectiveKind::AllReduce, .algorithm = net::Algorithm::Ring, .ranks = n, .elements = 1 << 18},
      5e-6, 1e9);
  for (const auto& rec : records) {
    ASSERT_EQ(rec.step_time_s.size(), 1u);
    EXPECT_NEAR(rec.step_time_s[0], 2e-3 + ring, 1e-12);
    EXPECT_DOUBLE_EQ(rec.compute_time_s[0], 2e-3);
    EXPECT_EQ(rec.calls[0], 1.0);
    EXPECT_EQ(rec.wire_bytes[0], 2.0 * (n - 1) / n * 4.0 * (1 << 18));
  }
}

// Operations are found by number however long after their issue they are awaited: a
// compute of 2 ms, awaited after 3,010 others of 1 us (ten awaited as soon as issued,
// 10 us, then 3,000 issued and awaited two at a time, 1.5 ms: past the replay's window
// of recent operations), still ends the step at 2 ms; awaiting one twice (#0, or #3 of
// those awaited at once), or one never issued, is an error naming the operation.
TEST(TraceReplay, AnOperationAwaitedLongAfterItsIssueIsFound) {
  comm::OpTrace trace;
  trace.ranks = 2;
  auto push = [&](comm::TracedOp op) { trace.ops.push_back(std::move(op)); };
  push(mark(comm::TraceMark::StepBegin));
  push({.kind = comm::TracedOp::Kind::Compute, .seconds = 2e-3});  // #0, awaited last
  const std::uint64_t at_once = 10, others = 3000;
  for (std::uint64_t op = 1; op <= at_once; ++op) {  // awaited as soon as issued, #0 still in flight
    push({.kind = comm::TracedOp::Kind::Compute, .seconds = 1e-6});
    push({.kind = comm::TracedOp::Kind::Wait, .op = op});
  }
  for (std::uint64_t op = at_once + 1; op <= at_once + others; ++op) {
    push({.kind = comm::TracedOp::Kind::Compute, .seconds = 1e-6});
    if ((op - at_once) % 2 == 0) {  // in pairs, the later first
      push({.kind = comm::TracedOp::Kind::Wait, .op = op});
      push({.kind = comm::TracedOp::Kind::Wait, .op = op - 1});
    }
  }
  push({.kind = comm::TracedOp::Kind::Wait, .op = 0});
  push(mark(comm::TraceMark::StepEnd));
  trace.operations = at_once + others + 1;

  for (const auto& rec : replay_on_ring(trace, 2)) {
    ASSERT_EQ(rec.step_time_s.size(), 1u);
    EXPECT_NEAR(rec.step_time_s[0], 2e-3, 1e-12);
  }

  for (const std::uint64_t bad : {std::uint64_t{0}, std::uint64_t{3}, at_once + others + 1}) {
    comm::OpTrace wrong = trace;
    wrong.ops.insert(wrong.ops.end() - 1, {.kind = comm::TracedOp::Kind::Wait, .op = bad});
    try {
      replay_on_ring(wrong, 2);
      FAIL() << "expected an error awaiting #" << bad;
    } catch (const std::exception& e) {  // the engine names the rank
      EXPECT_EQ(std::string(e.what()), fmt::format("rank 0: replay: operation #{} awaited, but it is not in flight "
                                                   "(not issued yet, or awaited already)",
                                                   bad));
    }
  }
}

// A live run measures every rank: timing_only there is an error, not ignored.
TEST(TimingOnly, LiveRunRefusesIt) {
  auto s = runner::parse_scenario(symmetric_cases().front().doc);
  s.timing_only = true;
  comm::LiveEnv env;
  env.world_size = s.ranks;
  try {
    runner::run_live(s, env);
    FAIL() << "expected an error";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/timing_only");
  }
}

// The command line: --timing-only marks the table; --dump-params cannot go with it.
TEST(TimingOnly, CommandLine) {
  const auto dir = testing::fresh_dir("timing_only_cli");
  const std::string scenario = std::string(DTSIM_SOURCE_DIR) + "/scenarios/choco_ring8_sign.json";
  auto ok = testing::run_command(std::string(DTSIM_BINARY) + " run --timing-only " + scenario + " --out " + dir.string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("emulated, timing-only"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("no loss or accuracy"), std::string::npos) << ok.output;
  auto bad = testing::run_command(std::string(DTSIM_BINARY) + " run --timing-only " + scenario + " --out " +
                                  dir.string() + " --dump-params " + (dir / "p").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("timing-only mode keeps no per-rank parameters"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace dtsim
