// Record-and-replay, the trace-driven prediction behind `dtsim compare`: every rank of a
// run records what it does (comm::RecordingCommunicator) and runner::replay_traces issues
// each rank's trace again on a network model. Recording an emulated run and replaying it
// on the same network must give that run's timing back bit for bit, on any topology and
// with work that differs per rank (irregular graphs, stragglers), since no time passes
// between an emulated rank's calls. A clock that advances between calls (a live rank's
// host work) is recorded as compute.
#include <gtest/gtest.h>

#include <future>

#include "comm/emulated.hpp"
#include "comm/live_env.hpp"
#include "comm/op_trace.hpp"
#include "comm/recording.hpp"
#include "network_models/closed_form.hpp"
#include "runner/run.hpp"
#include "scenario_cases.hpp"
#include "sim/task.hpp"
#include "test_util.hpp"

namespace dtsim {
namespace {

using nlohmann::json;
using testing::logistic;
using testing::resnet20;
using testing::scenario;

json path_of(int ranks) {
  json edges = json::array();
  for (int i = 0; i + 1 < ranks; ++i) edges.push_back({{"a", i}, {"b", i + 1}, {"latency_us", 2}, {"bandwidth_GBps", 4}});
  return {{"kind", "edges"}, {"edges", edges}};
}

// Cases one rank cannot stand for: ranks differ in neighbours or speed.
std::vector<testing::Case> asymmetric_cases() {
  json choco_path = scenario(5, logistic(),
                             {{"name", "choco_sgd"}, {"lr", 0.1}, {"compressor", {{"kind", "top_k"}, {"ratio", 0.25}}},
                              {"consensus_stepsize", 0.3}},
                             path_of(5));
  choco_path["compute"]["stragglers"] = json::array({{{"rank", 3}, {"slowdown", 2.5}}});
  return {
      {"choco_topk_path_with_straggler", choco_path},
      {"dpsgd_star", scenario(5, logistic(), {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.1}},
                              {{"kind", "star"}})},
      {"ecd_qsgd_path", scenario(4, logistic(),
                                 {{"name", "ecd_psgd"}, {"lr", 0.1}, {"compressor", {{"kind", "qsgd"}, {"levels", 16}}}},
                                 path_of(4))},
      {"deepsqueeze_star", scenario(4, resnet20(),
                                    {{"name", "deepsqueeze"}, {"lr", 0.1}, {"compressor", {{"kind", "scaled_sign"}}},
                                     {"consensus_stepsize", 0.2}},
                                    {{"kind", "star"}})},
  };
}

TEST(RecordReplay, ReplayingARecordedEmulatedRunGivesItsTimingBack) {
  auto cases = testing::symmetric_cases();
  for (auto& c : asymmetric_cases()) cases.push_back(c);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto s = runner::parse_scenario(c.doc);
    const auto plain = runner::run_emulated(s);
    std::vector<comm::OpTrace> traces;
    runner::RunOptions record;
    record.record_traces = &traces;
    const auto recorded = runner::run_emulated(s, record);
    // Recording changes nothing about the run.
    EXPECT_EQ(recorded.event_trace_hash, plain.event_trace_hash);
    EXPECT_EQ(recorded.step_time_s, plain.step_time_s);
    EXPECT_EQ(recorded.to_json()["per_step"]["loss"], plain.to_json()["per_step"]["loss"]);  // NaN (no loss) as null
    ASSERT_EQ(traces.size(), static_cast<std::size_t>(s.ranks));
    for (int r = 0; r < s.ranks; ++r) EXPECT_EQ(traces[static_cast<std::size_t>(r)].rank, r);

    const auto replayed = runner::replay_traces(s, traces);
    testing::expect_same_timing(replayed, plain);
    EXPECT_TRUE(std::isnan(replayed.loss.front()));
    EXPECT_TRUE(std::isnan(replayed.final_loss));
  }
}

// The replay times the recorded operations on the network it is given, not the one
// recorded on: centralized SGD's one all-reduce per step, replayed on a ring 4x slower
// and with 20 us more latency, takes its compute plus the closed form on that ring.
TEST(RecordReplay, ReplayTimesTheOperationsOnTheGivenNetwork) {
  json workload = logistic();
  workload["features"] = 15;  // 15 weights and a bias: 16 fp32, 4 per rank in the ring's schedule
  json doc = scenario(4, workload, {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}},
                      {{"kind", "ring"}});
  doc["network"]["algorithms"] = {{"all_reduce", "ring"}};
  doc["eval_every"] = 0;
  auto s = runner::parse_scenario(doc);
  std::vector<comm::OpTrace> traces;
  runner::RunOptions record;
  record.record_traces = &traces;
  const auto run = runner::run_emulated(s, record);

  s.network.nominal = {.latency_s = 23e-6, .bandwidth_bytes_per_s = 0.5e9};
  const auto replayed = runner::replay_traces(s, traces);
  const std::int64_t gradient = 16;
  const double ring = net::closed_form_seconds({.kind = net::CollectiveKind::AllReduce,
                                                .algorithm = net::Algorithm::Ring,
                                                .ranks = 4,
                                                .elements = gradient},
                                               23e-6, 0.5e9);
  ASSERT_EQ(replayed.step_time_s.size(), run.step_time_s.size());
  for (std::size_t t = 0; t < run.step_time_s.size(); ++t) {
    EXPECT_EQ(replayed.compute_time_s[t], run.compute_time_s[t]);
    EXPECT_NEAR(replayed.step_time_s[t] - replayed.compute_time_s[t], ring, 1e-12) << "step " << t + 1;
  }
  EXPECT_GT(ring, run.step_time_s.front() - run.compute_time_s.front());  // it did get slower
}

TEST(RecordReplay, TracesMustBeTheScenariosRanks) {
  const auto s = runner::parse_scenario(testing::symmetric_cases().front().doc);
  std::vector<comm::OpTrace> traces;
  runner::RunOptions record;
  record.record_traces = &traces;
  (void)runner::run_emulated(s, record);
  auto fewer = traces;
  fewer.pop_back();
  EXPECT_THROW((void)runner::replay_traces(s, fewer), config::InputError);
  auto swapped = traces;
  std::swap(swapped[0], swapped[1]);
  EXPECT_THROW((void)runner::replay_traces(s, swapped), config::InputError);
}

// A communicator whose clock the test moves: a live rank's clock, which also advances
// between calls (host work) and inside blocking operations.
class ClockCommunicator final : public comm::Communicator {
 public:
  std::string backend() const override { return "clock"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  double now() const override { return clock; }
  comm::Op compute(const sim::ComputeCost& cost, const std::function<void()>& work) override {
    work();
    clock += cost.flops;  // the test's "measured" seconds
    count_compute(cost.flops);
    return {};
  }
  comm::Op send(const at::Tensor& tensor, int) override {
    ++traffic_.calls;
    traffic_.wire_bytes += static_cast<std::uint64_t>(tensor.nbytes());
    clock += 0.25;  // a blocking send: the network's time
    return {};
  }
  double clock = 10.0;
};

TEST(RecordingCommunicator, RecordsComputeHostWorkAndWaits) {
  ClockCommunicator inner;
  comm::RecordingCommunicator rec(inner, {1});
  auto run = [](comm::RecordingCommunicator& c, ClockCommunicator& clock) -> sim::Task<void> {
    clock.clock += 0.5;  // host work before the first call
    co_await c.compute({.flops = 2.0}, [] {});
    auto op = c.send(at::ones({4}), 1);
    clock.clock += 0.125;  // host work while the send is in flight
    co_await op;
    auto busy = c.compute({.flops = 1.0}, [] {});  // a live compute is over when it returns,
    clock.clock += 0.0625;                          // so this host work comes after it
    co_await busy;
    c.mark(comm::TraceMark::End);
    co_await c.compute({.flops = 1.0}, [] {});  // after End: not recorded
  };
  sim::run_blocking(run(rec, inner));

  using Kind = comm::TracedOp::Kind;
  const auto& ops = rec.trace().ops;
  const std::vector<Kind> kinds{Kind::Compute, Kind::Wait, Kind::Compute, Kind::Wait,    Kind::Send,
                                Kind::Compute, Kind::Wait, Kind::Wait,    Kind::Compute, Kind::Wait,
                                Kind::Compute, Kind::Wait, Kind::Mark};
  ASSERT_EQ(ops.size(), kinds.size());
  for (std::size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ(ops[i].kind, kinds[i]) << i;
  EXPECT_EQ(ops[0].seconds, 0.5);   // host work, as compute #0
  EXPECT_EQ(ops[1].op, 0u);
  EXPECT_EQ(ops[2].seconds, 2.0);   // the compute call, #1
  EXPECT_EQ(ops[3].op, 1u);
  EXPECT_EQ(ops[4].numel, 4);       // the send (#2) to neighbour slot 0; its 0.25 s are the network's
  EXPECT_EQ(ops[4].variant, 0);
  EXPECT_EQ(ops[5].seconds, 0.125);  // host work while it was in flight, #3
  EXPECT_EQ(ops[7].op, 2u);          // then the send is awaited
  EXPECT_EQ(ops[8].seconds, 1.0);    // the compute #4, awaited as it returned
  EXPECT_EQ(ops[9].op, 4u);
  EXPECT_EQ(ops[10].seconds, 0.0625);  // then the host work, #5; awaiting #4 records nothing more
  EXPECT_EQ(ops[11].op, 5u);
  EXPECT_EQ(rec.host_seconds(), 0.6875);
  EXPECT_EQ(rec.compute_seconds(), 4.0);  // the wrapped communicator's figures
  EXPECT_EQ(rec.traffic().calls, 1u);
  EXPECT_EQ(rec.traffic().wire_bytes, 16u);
  EXPECT_EQ(rec.now(), inner.now());

  // A peer that is not a gossip neighbour has no slot in the trace.
  EXPECT_THROW((void)rec.send(at::ones({1}), 0), std::invalid_argument);
}

TEST(OpTrace, BytesRoundTripAndOtherBytesAreRefused) {
  const auto s = runner::parse_scenario(asymmetric_cases().front().doc);
  std::vector<comm::OpTrace> traces;
  runner::RunOptions record;
  record.record_traces = &traces;
  (void)runner::run_emulated(s, record);
  const auto& t = traces.at(1);
  const auto back = comm::op_trace_from_bytes(comm::to_bytes(t));
  EXPECT_EQ(back.rank, t.rank);
  EXPECT_EQ(back.ranks, t.ranks);
  EXPECT_EQ(back.operations, t.operations);
  EXPECT_EQ(back.phase_names, t.phase_names);
  ASSERT_EQ(back.ops.size(), t.ops.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    EXPECT_EQ(back.ops[i].kind, t.ops[i].kind);
    EXPECT_EQ(back.ops[i].stream, t.ops[i].stream);
    EXPECT_EQ(back.ops[i].dtype, t.ops[i].dtype);
    EXPECT_EQ(back.ops[i].variant, t.ops[i].variant);
    EXPECT_EQ(back.ops[i].numel, t.ops[i].numel);
    EXPECT_EQ(back.ops[i].seconds, t.ops[i].seconds);
    EXPECT_EQ(back.ops[i].op, t.ops[i].op);
    EXPECT_EQ(back.ops[i].peer_slots, t.ops[i].peer_slots);
  }
  EXPECT_THROW((void)comm::op_trace_from_bytes({0xc1, 0x00}), config::InputError);
  const auto not_a_trace = nlohmann::json::to_msgpack(json{{"rank", 0}});
  EXPECT_THROW((void)comm::op_trace_from_bytes(not_a_trace), config::InputError);
  // Well-formed MessagePack whose entries the replay could not act on: each is named.
  auto with_entry = [&](json entry) {
    json doc = json::from_msgpack(comm::to_bytes(t));
    doc["ops"].push_back(std::move(entry));
    return json::to_msgpack(doc);
  };
  auto expect_refused = [&](json entry, const std::string& what) {
    try {
      (void)comm::op_trace_from_bytes(with_entry(std::move(entry)));
      ADD_FAILURE() << "accepted " << what;
    } catch (const config::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const int compute = 0, phase_begin = 8, mark = 10;
  expect_refused(json::array({compute, false, 6, 0, 0, -1.0, 0, json::array()}), "-1 seconds");
  expect_refused(json::array({compute, false, 999, 0, 0, 0.0, 0, json::array()}), "dtype 999");
  expect_refused(json::array({compute, false, 6, 0, -5, 0.0, 0, json::array()}), "-5 elements");
  expect_refused(json::array({phase_begin, false, 6, 99, 0, 0.0, 0, json::array()}), "phase #99");
  expect_refused(json::array({mark, false, 6, 7, 0, 0.0, 0, json::array()}), "unknown mark 7");
  expect_refused(json::array({42, false, 6, 0, 0, 0.0, 0, json::array()}), "unknown kind 42");
  EXPECT_NO_THROW((void)comm::op_trace_from_bytes(with_entry(json::array({compute, false, 6, 0, 0, 0.5, 0, json::array()}))));
}

// The command line: `dtsim run --record-trace DIR` then `dtsim replay` on the same
// scenario gives the run's per-step times and bits back; on a network 10x slower every
// step takes at least as long and the run longer; traces that are missing, or of another
// rank count, are one-line errors (exit 2), and a timing-only run cannot record.
TEST(ReplayCli, RecordedRunReplaysAndAnotherNetworkChangesIt) {
  const auto dir = testing::fresh_dir("replay_cli");
  const std::string bin = DTSIM_BINARY;
  json doc = testing::read_json(std::string(DTSIM_SOURCE_DIR) + "/scenarios/choco_ring8_sign.json");
  doc["steps"] = 30;
  testing::write_file(dir / "s.json", doc.dump());
  const std::string scenario = (dir / "s.json").string(), traces = (dir / "traces").string();
  auto run = testing::run_command(bin + " run --quiet " + scenario + " --record-trace " + traces);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto replay = testing::run_command(bin + " replay " + scenario + " --traces " + traces);
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  EXPECT_NE(replay.output.find("emulated, replayed"), std::string::npos) << replay.output;
  const json ran = testing::read_json(dir / "s.result.json");
  const json replayed = testing::read_json(dir / "s.replay.result.json");
  EXPECT_EQ(replayed["per_step"]["time_s"], ran["per_step"]["time_s"]);
  EXPECT_EQ(replayed["per_step"]["n_bits"], ran["per_step"]["n_bits"]);
  EXPECT_EQ(replayed["per_step"]["wire_bytes"], ran["per_step"]["wire_bytes"]);
  EXPECT_EQ(replayed["replayed_from"], traces);
  EXPECT_TRUE(replayed["final"]["train_loss"].is_null());

  doc["network"]["bandwidth_GBps"] = doc["network"]["bandwidth_GBps"].get<double>() / 10;
  testing::write_file(dir / "slow.json", doc.dump());
  auto slow = testing::run_command(bin + " replay --quiet " + (dir / "slow.json").string() + " --traces " + traces);
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  const json slower = testing::read_json(dir / "slow.replay.result.json");
  for (std::size_t t = 0; t < 30; ++t)
    EXPECT_GE(slower["per_step"]["time_s"][t].get<double>(), ran["per_step"]["time_s"][t].get<double>()) << t;
  EXPECT_GT(slower["step_mean_s"].get<double>(), ran["step_mean_s"].get<double>());
  EXPECT_EQ(slower["per_step"]["compute_time_s"], ran["per_step"]["compute_time_s"]);

  auto missing = testing::run_command(bin + " replay " + scenario + " --traces " + (dir / "none").string());
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("rank0.trace: cannot read rank 0's trace"), std::string::npos) << missing.output;
  doc["ranks"] = 4;
  testing::write_file(dir / "four.json", doc.dump());
  auto fewer = testing::run_command(bin + " replay " + (dir / "four.json").string() + " --traces " + traces);
  EXPECT_EQ(fewer.exit_code, 2) << fewer.output;
  EXPECT_NE(fewer.output.find("is rank 0 of 8, not rank 0 of 4"), std::string::npos) << fewer.output;
  auto timing = testing::run_command(bin + " run --timing-only " + scenario + " --record-trace " + traces);
  EXPECT_EQ(timing.exit_code, 2) << timing.output;
}

// A live job records too: 2 Gloo ranks write their traces, and the replay on the
// scenario's network spends, per step, at least the compute the live ranks measured.
TEST(ReplayCli, LiveRanksRecordTheirTraces) {
  if (!testing::kHaveGloo) GTEST_SKIP() << testing::kNoGloo;
  const auto dir = testing::fresh_dir("replay_live");
  const json doc = scenario(2, logistic(), {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.1}},
                            {{"kind", "ring"}});
  testing::write_file(dir / "s.json", doc.dump());
  const std::string bin = DTSIM_BINARY, traces = (dir / "traces").string();
  const int port = comm::free_loopback_port();
  std::vector<std::future<testing::CommandResult>> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(std::async(std::launch::async, testing::run_command,
                               "RANK=" + std::to_string(r) + " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                   std::to_string(port) + " DTSIM_TIMEOUT_S=60 timeout 300 " + bin + " live --quiet " +
                                   (dir / "s.json").string() + " --record-trace " + traces));
  for (auto& rank : ranks) {
    const auto res = rank.get();
    ASSERT_EQ(res.exit_code, 0) << res.output;
  }
  auto replay = testing::run_command(bin + " replay --quiet " + (dir / "s.json").string() + " --traces " + traces);
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  const json live = testing::read_json(dir / "s.live.result.json");
  const json replayed = testing::read_json(dir / "s.replay.result.json");
  ASSERT_EQ(replayed["per_step"]["compute_time_s"].size(), 12u);
  for (std::size_t t = 0; t < 12; ++t) {
    const double live_compute = live["per_step"]["compute_time_s"][t].get<double>();
    EXPECT_GE(replayed["per_step"]["compute_time_s"][t].get<double>(), live_compute * (1 - 1e-9)) << t;
    EXPECT_GE(replayed["per_step"]["time_s"][t].get<double>(), live_compute * (1 - 1e-9)) << t;
  }
  EXPECT_EQ(replayed["per_step"]["n_bits"], live["per_step"]["n_bits"]);
}

}  // namespace
}  // namespace dtsim
