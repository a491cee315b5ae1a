// Whole emulated runs: reproducibility, and properties of the algorithms that hold
// exactly whatever the data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "runner/divergence.hpp"
#include "runner/report.hpp"
#include "runner/result_fields.hpp"
#include "runner/run.hpp"
#include "runner/version.hpp"
#include "test_util.hpp"

namespace dtsim::runner {
namespace {

using nlohmann::json;

Scenario small(const std::string& variant, const std::string& topology = "ring", int ranks = 4) {
  return parse_scenario(json{
      {"name", "small"},
      {"ranks", ranks},
      {"steps", 30},
      {"seed", 3},
      {"workload", {{"kind", "logistic_regression"}, {"samples", 512}, {"features", 8}, {"batch_size", 16}}},
      {"algorithm",
       {{"name", "parallel_sgd"}, {"variant", variant}, {"lr", 0.2}, {"momentum", 0.9}, {"weight_decay", 1e-4}}},
      {"topology", {{"kind", topology}}},
      {"network", {{"model", "alpha_beta"}, {"latency_us", 3}, {"bandwidth_GBps", 2}}}});
}

// The pointers of every field in a result (arrays of objects as "*"; "/scenario" as one
// field, described in scenarios/README.md).
void collect_fields(const json& v, const std::string& path, std::set<std::string>& out) {
  if (!path.empty()) out.insert(path);
  if (path == "/scenario") return;
  if (v.is_object())
    for (const auto& [key, value] : v.items()) collect_fields(value, path + "/" + key, out);
  if (v.is_array())
    for (const auto& item : v)
      if (item.is_object())
        for (const auto& [key, value] : item.items()) collect_fields(value, path + "/*/" + key, out);
}

// Every field a run writes is described (runner/result_fields.cpp, docs/result_file.md),
// and every described field is written by one of: a run with an lr schedule and
// evaluations, a timing-only run, a replay of recorded traces.
TEST(ResultFile, EveryFieldWrittenIsDescribedAndEveryDescriptionWritten) {
  auto s = small("decentralized");
  s.eval_every = 10;
  auto doc = s.to_json();
  doc["algorithm"]["lr_schedule"] = {{"type", "multistep"}, {"milestones", {1}}, {"gamma", 0.5}};
  s = parse_scenario(doc);
  std::vector<comm::OpTrace> traces;
  RunOptions record;
  record.record_traces = &traces;
  const auto full = run_emulated(s, record);
  auto timing = s;
  timing.timing_only = true;
  std::set<std::string> written;
  for (const auto& r : {full, run_emulated(timing), replay_traces(s, traces)}) collect_fields(r.to_json(), "", written);
  std::set<std::string> described;
  for (const auto& f : result_fields()) described.insert(f.pointer);
  for (const auto& w : written) EXPECT_TRUE(described.count(w)) << w << " is written but not described";
  for (const auto& d : described) EXPECT_TRUE(written.count(d)) << d << " is described but never written";
  EXPECT_EQ(full.to_json()["dtsim_result_version"], kResultVersion);
  // The new figures: the whole simulated time, the step-time percentiles.
  const json j = full.to_json();
  double sum = 0;
  for (double t : full.step_time_s) sum += t;
  EXPECT_NEAR(j["simulated_time_s"].get<double>(), sum, 1e-12 * sum);
  EXPECT_LE(j["step_percentiles_s"]["p50"].get<double>(), j["step_percentiles_s"]["p99"].get<double>());
  EXPECT_EQ(j["step_percentiles_s"]["max"].get<double>(), *std::max_element(full.step_time_s.begin(), full.step_time_s.end()));
}

// The divergence rule (runner/divergence.hpp) on hand-made curves.
TEST(Divergence, TheStatedRule) {
  const double nan = std::nan("");
  EXPECT_EQ(diverged_at_step(std::vector<double>{0.7, 0.6, 0.5}, 0.5, 0.1), 0);
  EXPECT_EQ(diverged_at_step(std::vector<double>{0.7, 6.9, 0.5}, 0.5, 0.1), 0);  // below 10x
  EXPECT_EQ(diverged_at_step(std::vector<double>{0.7, 7.1, 0.5}, 0.5, 0.1), 2);  // above 10x
  EXPECT_EQ(diverged_at_step(std::vector<double>{0.7, 0.6, nan}, nan, 0.1), 3);
  EXPECT_EQ(diverged_at_step(std::vector<double>{0.7, 0.6, 0.5}, 130.0, 0.1), 3);  // only the final model
  EXPECT_EQ(diverged_at_step(std::vector<double>{0.7, 0.6, 0.5}, 0.5, HUGE_VAL), 3);
  EXPECT_EQ(diverged_at_step(std::vector<double>{}, nan, nan), 0);
}

// A learning rate far too large: the run is marked diverged in the result and the table.
TEST(Divergence, AHugeLearningRateIsMarked) {
  auto s = small("decentralized");
  s.algorithm.optimizer.lr = 1000;
  const auto r = run_emulated(s);
  ASSERT_GT(r.diverged_at_step, 0);
  EXPECT_EQ(r.to_json()["diverged_at_step"], r.diverged_at_step);
  EXPECT_NE(format_table(r).find(fmt::format("DIVERGED at step {}", r.diverged_at_step)), std::string::npos)
      << format_table(r);
  const auto fine = run_emulated(small("decentralized"));
  EXPECT_EQ(fine.diverged_at_step, 0);
  EXPECT_TRUE(fine.to_json()["diverged_at_step"].is_null());
}

// Shape-only workloads have no real math: no loss or accuracy anywhere (null), said why,
// and no divergence judged; their times and bits are real.
TEST(Runs, ShapeOnlyWorkloadsReportNoLoss) {
  auto doc = small("centralized").to_json();
  doc["workload"] = {{"type", "resnet20"}, {"batch_size", 4}};
  doc["steps"] = 3;
  doc["eval_every"] = 1;
  const auto r = run_emulated(parse_scenario(doc));
  const json j = r.to_json();
  for (const auto& l : j["per_step"]["loss"]) EXPECT_TRUE(l.is_null());
  for (const char* key : {"train_loss", "train_accuracy", "test_loss", "test_accuracy"}) {
    EXPECT_TRUE(j["final"][key].is_null()) << key;
    for (const auto& e : j["eval"]) EXPECT_TRUE(e[key].is_null()) << key;
  }
  EXPECT_EQ(j["no_loss_reason"], "workload resnet20 has no real math (a shape-only model)");
  EXPECT_TRUE(j["diverged_at_step"].is_null());
  EXPECT_GT(j["n_bits_per_step"].get<double>(), 0);
  const auto table = format_table(r);
  EXPECT_NE(table.find("no loss or accuracy: workload resnet20 has no real math"), std::string::npos) << table;
  EXPECT_EQ(table.find("final training loss"), std::string::npos) << table;
}

// Same scenario and seed: the result files are identical byte for byte (the default
// compute timing is the deterministic cost model).
TEST(Runs, SameSeedGivesBitIdenticalOutput) {
  auto dir = testing::fresh_dir("determinism");
  const std::string scenario = std::string(DTSIM_SOURCE_DIR) + "/scenarios/quickstart.json";
  for (const char* out : {"a", "b"}) {
    auto r = testing::run_command(std::string(DTSIM_BINARY) + " run --quiet " + scenario + " --out " +
                                  (dir / out).string() + " --dump-params " + (dir / out / "params").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const auto a = testing::read_file(dir / "a" / "quickstart.result.json");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, testing::read_file(dir / "b" / "quickstart.result.json"));
  for (int r = 0; r < 8; ++r) {
    const auto name = "params.rank" + std::to_string(r) + ".json";
    EXPECT_EQ(testing::read_file(dir / "a" / name), testing::read_file(dir / "b" / name));
  }
  // A different seed changes the trajectory.
  auto other = small("decentralized");
  auto base = run_emulated(other);
  other.seed = 4;
  EXPECT_NE(run_emulated(other).loss, base.loss);
}

// Centralized SGD averages gradients with an all-reduce: every rank applies the same
// update, so the models never drift apart; 32 d bits per step; 2 (n-1)/n * 4d wire
// bytes per rank per step on average.
TEST(Runs, CentralizedSgdKeepsRanksIdentical) {
  auto r = run_emulated(small("centralized"));
  EXPECT_EQ(r.consensus_distance, 0.0);
  const double d = 9;  // 8 weights + 1 bias
  for (double bits : r.n_bits) EXPECT_EQ(bits, 32 * d);
  for (double bytes : r.wire_bytes) EXPECT_DOUBLE_EQ(bytes, 2.0 * 3 / 4 * 4 * d);
  EXPECT_LT(r.final_loss, r.loss.front());  // it learns
}

// D-PSGD on a ring: each rank sends its 4d-byte model to both neighbours; the
// phases are the reference's names; the step's time is the sum of its phases.
TEST(Runs, DecentralizedSgdOnARing) {
  auto r = run_emulated(small("decentralized"));
  for (double bytes : r.wire_bytes) EXPECT_EQ(bytes, 2 * 4 * 9);
  EXPECT_EQ(r.phase_names, (std::vector<std::string>{"forward_pass", "backward_pass", "sync/apply_grad",
                                                     "sync/get_data", "sync/sync", "sync/update_model"}));
  double phases = 0.0;
  for (double t : r.phase_mean_s) phases += t;
  EXPECT_NEAR(phases, r.mean_step_time_s(), 1e-12 * r.mean_step_time_s());
  EXPECT_GT(r.consensus_distance, 0.0);  // gossip only approximates the average
  EXPECT_LT(r.final_loss, r.loss.front());
}

// On a complete graph with W = 1/n, gossip is exact averaging: D-PSGD keeps every
// rank's model identical, up to float rounding of the weighted sums.
TEST(Runs, DecentralizedSgdOnCompleteGraphIsExactAveraging) {
  auto r = run_emulated(small("decentralized", "complete"));
  EXPECT_LT(r.consensus_distance, 1e-10);
}

// D-PSGD with a compressor (naive compressed gossip, x_i <- w_ii x_i + sum_j w_ij C(x_j)).
RunResult with_compressor(const json& compressor, std::int64_t features = 8) {
  auto doc = json{{"name", "compressed"},
                  {"ranks", 4},
                  {"steps", 30},
                  {"seed", 3},
                  {"workload", {{"kind", "logistic_regression"}, {"samples", 512}, {"features", features}, {"batch_size", 16}}},
                  {"algorithm",
                   {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.2}, {"momentum", 0.9}, {"weight_decay", 1e-4}}},
                  {"topology", {{"kind", "ring"}}},
                  {"network", {{"model", "alpha_beta"}, {"latency_us", 3}, {"bandwidth_GBps", 2}}}};
  if (!compressor.is_null()) doc["algorithm"]["compressor"] = compressor;
  return run_emulated(parse_scenario(doc));
}

// The identity compressor (explicit or the default) is plain D-PSGD, bit for bit:
// the same trajectory, messages and n_bits = 32 d as before compressors existed.
TEST(Runs, DecentralizedSgdIdentityCompressorIsThePlainAlgorithm) {
  const auto plain = with_compressor(nullptr), identity = with_compressor({{"kind", "identity"}});
  const auto base = run_emulated(small("decentralized"));
  for (const auto* r : {&plain, &identity}) {
    EXPECT_EQ(r->loss, base.loss);
    EXPECT_EQ(r->final_loss, base.final_loss);
    EXPECT_EQ(r->consensus_distance, base.consensus_distance);
    EXPECT_EQ(r->event_trace_hash, base.event_trace_hash);
    for (double bits : r->n_bits) EXPECT_EQ(bits, 32 * 9);
  }
}

// top_k keeping everything sends every value: the same mixing as identity (up to the
// order of the float additions), at 64 bits per value.
TEST(Runs, DecentralizedSgdTopKRatioOneMatchesIdentity) {
  const auto identity = with_compressor(nullptr);
  const auto top_all = with_compressor({{"kind", "top_k"}, {"ratio", 1.0}});
  ASSERT_EQ(top_all.loss.size(), identity.loss.size());
  for (std::size_t t = 0; t < identity.loss.size(); ++t) EXPECT_NEAR(top_all.loss[t], identity.loss[t], 1e-6) << t;
  EXPECT_NEAR(top_all.final_loss, identity.final_loss, 1e-6);
  EXPECT_NEAR(top_all.consensus_distance, identity.consensus_distance, 1e-8);
  for (double bits : top_all.n_bits) EXPECT_EQ(bits, 64 * 9);
}

// n_bits = 64 K for top_k (gossip.hpp): 100 weights and a bias at 10% keep
// K = 10 + max(1, floor(0.1)) = 11 values; each message is K (value, index) pairs.
TEST(Runs, DecentralizedSgdTopKNBits) {
  const auto r = with_compressor({{"kind", "top_k"}, {"ratio", 0.1}}, 100);
  for (double bits : r.n_bits) EXPECT_EQ(bits, 64 * 11);
  for (double bytes : r.wire_bytes) EXPECT_EQ(bytes, 2 * 8 * 11);  // to both ring neighbours
  EXPECT_TRUE(std::isfinite(r.final_loss));
  EXPECT_LT(r.final_loss, r.loss.front());
  EXPECT_EQ(r.phase_names, (std::vector<std::string>{"forward_pass", "backward_pass", "sync/apply_grad",
                                                     "sync/get_data", "sync/sync", "sync/update_model"}));
}

// Centralized SGD takes no compressor: a non-identity one is an error naming the field.
TEST(Runs, CentralizedSgdRejectsACompressor) {
  auto doc = small("centralized").to_json();
  doc["algorithm"]["compressor"] = {{"kind", "top_k"}, {"ratio", 0.5}};
  try {
    run_emulated(parse_scenario(doc));
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {  // the engine prefixes the failing rank
    EXPECT_NE(std::string(e.what()).find("/algorithm/compressor: parallel_sgd variant centralized takes no compressor (got "
                                         "top_k; only the decentralized variant does)"),
              std::string::npos)
        << e.what();
  }
}

// The engine's event trace (every fired event's time, order and kind) hashes the same
// for two runs of one scenario, on the flow model too, and differently for another seed.
TEST(Runs, EventTraceIsDeterministic) {
  auto s = small("decentralized", "ring", 6);
  s.network.model = "flow";
  const auto a = run_emulated(s), b = run_emulated(s);
  EXPECT_NE(a.event_trace_hash, 0u);
  EXPECT_EQ(a.event_trace_hash, b.event_trace_hash);
  EXPECT_EQ(a.step_time_s, b.step_time_s);
  s.network.perturbations.jitter_s = 1e-6;  // seeded jitter changes the times, not the math
  const auto c = run_emulated(s);
  EXPECT_NE(c.event_trace_hash, a.event_trace_hash);
  EXPECT_EQ(c.loss, a.loss);
}

// --trace writes Chrome/Perfetto trace-event JSON: a track per rank with its phases, and
// a track per (src, dst) pair of the network with every message and its bytes.
TEST(Runs, TraceFileHasRankPhasesAndMessages) {
  auto dir = testing::fresh_dir("trace");
  RunOptions options;
  options.trace_file = dir / "trace.json";
  auto s = small("decentralized", "ring", 4);
  s.steps = 3;
  run_emulated(s, options);
  const auto trace = testing::read_json(dir / "trace.json");
  std::map<int, std::string> process;
  int phases = 0, messages = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"].get<int>()] = e["args"]["name"];
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const auto& owner = process.at(e["pid"].get<int>());
    if (owner == "network") {
      if (e["args"]["bytes"].get<double>() == 4.0 * 9) ++messages;  // the 9-parameter model
    } else {
      ++phases;
      EXPECT_EQ(owner.rfind("rank ", 0), 0u);
    }
    EXPECT_GE(e["dur"].get<double>(), 0.0);
  }
  // 4 ranks x 3 steps x 6 phases; each step every rank sends its model to 2 neighbours
  // (the final reductions' ring messages have other sizes).
  EXPECT_EQ(phases, 4 * 3 * 6);
  EXPECT_EQ(messages, 4 * 3 * 2);
}

TEST(Runs, TableNamesEveryPhase) {
  auto r = run_emulated(small("centralized"));
  const auto table = format_table(r);
  for (const auto& name : r.phase_names) EXPECT_NE(table.find("| " + name), std::string::npos) << table;
  EXPECT_NE(table.find("bits/step/rank (n_bits): 288"), std::string::npos) << table;
}


// The same step times, bits, bytes, calls, losses and evaluations, bit for bit.
void expect_equal_figures(const RunResult& with, const RunResult& without, const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(with.step_time_s, without.step_time_s);
  EXPECT_EQ(with.compute_time_s, without.compute_time_s);
  EXPECT_EQ(with.n_bits, without.n_bits);
  EXPECT_EQ(with.wire_bytes, without.wire_bytes);
  EXPECT_EQ(with.calls, without.calls);
  const auto same_or_both_nan = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  ASSERT_EQ(with.loss.size(), without.loss.size());
  for (std::size_t i = 0; i < with.loss.size(); ++i) EXPECT_TRUE(same_or_both_nan(with.loss[i], without.loss[i])) << i;
  EXPECT_TRUE(same_or_both_nan(with.final_loss, without.final_loss));
  ASSERT_EQ(with.eval.size(), without.eval.size());
  for (std::size_t i = 0; i < with.eval.size(); ++i) {
    EXPECT_EQ(with.eval[i].time_s, without.eval[i].time_s);
    EXPECT_TRUE(same_or_both_nan(with.eval[i].train_loss, without.eval[i].train_loss));
  }
}

// Collective reuse changes no figure: every regression scenario of bench/baselines, and
// runs that replay most of their collectives (an all-reduce per step on the uncontended
// model; SINGA DistOpt's fused partitions on the flow model, full and timing-only), give
// the same figures with and without it.
void expect_same_figures(const RunResult& with, const RunResult& without, const std::string& name) {
  expect_equal_figures(with, without, name);
  EXPECT_TRUE(with.reuse.enabled);
  EXPECT_FALSE(without.reuse.enabled);
  EXPECT_EQ(without.reuse.stats.replayed, 0u);
}

RunResult without_reuse(Scenario s) {
  s.network.reuse_collectives = false;
  return run_emulated(s);
}

// The scenarios of bench/baselines/simulated.json (the regression gate's).
std::vector<Scenario> regression_scenarios() {
  const auto dir = std::filesystem::path(DTSIM_SOURCE_DIR) / "bench" / "baselines";
  const auto baseline = json::parse(testing::read_file(dir / "simulated.json"));
  std::vector<Scenario> scenarios;
  for (const auto& entry : baseline["scenarios"]) scenarios.push_back(load_scenario(dir / entry["file"].get<std::string>()));
  return scenarios;
}

TEST(CollectiveReuseRuns, EveryRegressionScenarioBothWays) {
  const auto scenarios = regression_scenarios();
  ASSERT_GE(scenarios.size(), 5u);
  for (const auto& s : scenarios) {
    const auto with = run_emulated(s);
    expect_same_figures(with, without_reuse(s), s.name);
    EXPECT_EQ(with.reuse.stats.restarts, 0u) << s.name;
  }
}

TEST(CollectiveReuseRuns, ReplayedRunsKeepTheirFigures) {
  auto centralized = small("centralized", "ring", 8);
  centralized.steps = 60;
  const auto c = run_emulated(centralized);
  expect_same_figures(c, without_reuse(centralized), "centralized");
  EXPECT_GT(c.reuse.stats.hit_rate(), 0.6);  // records are per binade of simulated time

  // SINGA's synchronous DistOpt on ResNet-50's shapes, 16 ranks on a ring, flow model:
  // eleven fused partitions per step, each started as the one before it completes.
  auto sync = load_scenario(std::filesystem::path(DTSIM_SOURCE_DIR) / "scenarios" / "singa_resnet50_sync.json");
  sync.network.model = "flow";
  sync.steps = 4;
  sync.timing_only = true;
  const auto t = run_emulated(sync);
  expect_same_figures(t, without_reuse(sync), "singa_resnet50_sync, flow, timing only");
  EXPECT_GE(t.reuse.stats.replayed, 10u);  // the first step records the partitions
  const auto j = json::parse(t.to_json().dump());
  EXPECT_EQ(j["collective_reuse"]["replayed"], t.reuse.stats.replayed);
  EXPECT_EQ(j["collective_reuse"]["hit_rate"], t.reuse.stats.hit_rate());

  // The same on a 4 x 4 torus: a partition's ranks are done at different instants and
  // the next partition overlaps it, so whole steps are replayed as busy periods. (Twice
  // the compute speed: 10 steps of 0.39 s, one of them replayed.)
  sync.topology = net::parse_topology("torus:4x4");
  sync.steps = 10;
  sync.compute.model.flops_per_s = 8e12;
  const auto torus = run_emulated(sync);
  expect_same_figures(torus, without_reuse(sync), "singa_resnet50_sync, 4 x 4 torus, flow, timing only");
  EXPECT_GE(torus.reuse.stats.replayed, 11u);
  EXPECT_EQ(torus.reuse.stats.restarts, 0u);
}

// The ring recurrence (network_models/ring_recurrence.hpp) changes no figure either:
// every regression scenario, and a timing-only point whose eleven fused partitions a
// step are rings of 64 ranks on an 8 x 8 torus under alpha_beta (SINGA's sync DistOpt on
// ResNet-50's shapes), give the same figures with it and with every message simulated.
RunResult without_ring_recurrence(Scenario s) {
  s.network.evaluate_rings = false;
  return run_emulated(s);
}

TEST(RingRecurrenceRuns, EveryRegressionScenarioAndATimingPointBothWays) {
  const auto scenarios = regression_scenarios();
  ASSERT_GE(scenarios.size(), 5u);
  for (const auto& s : scenarios) expect_equal_figures(run_emulated(s), without_ring_recurrence(s), s.name);
  auto sync = load_scenario(std::filesystem::path(DTSIM_SOURCE_DIR) / "scenarios" / "singa_resnet50_sync.json");
  ASSERT_EQ(sync.network.model, "alpha_beta");
  sync.ranks = 64;
  sync.topology = net::parse_topology("torus:8x8");
  sync.steps = 3;
  sync.timing_only = true;
  expect_equal_figures(run_emulated(sync), without_ring_recurrence(sync), "singa_resnet50_sync, 8 x 8 torus, timing only");
  // The flow model (ring_wavefront.hpp): the partitions overlap as busy periods, two
  // senders per ring coupled on the torus, none on the ring.
  sync.network.model = "flow";
  expect_equal_figures(run_emulated(sync), without_ring_recurrence(sync), "singa_resnet50_sync, 8 x 8 torus, flow");
  sync.topology = net::parse_topology("ring");
  expect_equal_figures(run_emulated(sync), without_ring_recurrence(sync), "singa_resnet50_sync, ring of 64, flow");
  // With collective reuse off, the flow model's rings are computed all the same.
  sync.network.reuse_collectives = false;
  expect_equal_figures(run_emulated(sync), without_ring_recurrence(sync), "singa_resnet50_sync, ring of 64, flow, no reuse");
  sync.topology = net::parse_topology("torus:8x8");
  expect_equal_figures(run_emulated(sync), without_ring_recurrence(sync), "singa_resnet50_sync, 8 x 8 torus, flow, no reuse");
}

}  // namespace
}  // namespace dtsim::runner
