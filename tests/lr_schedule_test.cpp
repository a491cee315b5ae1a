// The reference's optimizer setup (ChocoSGD's create_scheduler.py and parameter groups):
// algorithm.lr_schedule against its closed forms at the steps where they change, the
// scenario syntax and its errors, and whole runs in which the schedule (and the "bn"
// weight-decay rule) must reach every algorithm's update.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/apply_gradient.hpp"
#include "algorithms/lr_schedule.hpp"
#include "algorithms/lr_schedules/convex_decay.hpp"
#include "algorithms/lr_schedules/cosine.hpp"
#include "algorithms/lr_schedules/multistep.hpp"
#include "algorithms/registry.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "test_util.hpp"

namespace dtsim {
namespace {

using algorithms::LrSchedule;
using algorithms::LrScheduleRank;
using algorithms::LrScheduleSpec;
using algorithms::ConvexDecaySettings;
using algorithms::CosineSettings;
using algorithms::lr_schedule_settings;
using algorithms::MultistepSettings;
using nlohmann::json;

// A shard of 100 samples in batches of 32: S = ceil(100 / 32) = 4 steps per epoch.
constexpr LrScheduleRank kRank{.shard_samples = 100, .batch_size = 32, .neighborhood = 3, .run_steps = 1000};

TEST(LrSchedule, StepsPerEpochRoundUpAPartialLastBatch) {
  EXPECT_EQ(algorithms::steps_per_epoch(100, 32), 4);
  EXPECT_EQ(algorithms::steps_per_epoch(128, 32), 4);
  EXPECT_EQ(algorithms::steps_per_epoch(129, 32), 5);
  EXPECT_EQ(algorithms::steps_per_epoch(50, 50), 1);  // full batch
  EXPECT_EQ(LrSchedule(0.1, {.warmup_epochs = 1}, kRank).steps_per_epoch(), 4.0);
}

TEST(LrSchedule, ConstantIsTheScenarioLrAtEveryStep) {
  const LrSchedule s(0.3, {}, kRank);
  for (std::int64_t t : {1, 2, 999, 5000}) EXPECT_EQ(s.at(t), 0.3) << t;
}

// E = 2 epochs of S = 4 steps: W = 8. From 0: lr t / 8 up to step 7, lr from step 8 on
// (the reference's linear segment over epochs [0, E)).
TEST(LrSchedule, LinearWarmUpReachesTheLrAtTheEndOfItsEpochs) {
  const LrSchedule from_zero(0.4, {.warmup_epochs = 2}, kRank);
  EXPECT_DOUBLE_EQ(from_zero.at(1), 0.05);
  EXPECT_DOUBLE_EQ(from_zero.at(4), 0.2);
  EXPECT_DOUBLE_EQ(from_zero.at(7), 0.35);
  EXPECT_EQ(from_zero.at(8), 0.4);
  EXPECT_EQ(from_zero.at(9), 0.4);
  // From warmup_init_lr 0.1: 0.1 + 0.3 t / 8.
  const LrSchedule from_lr0(0.4, {.warmup_epochs = 2, .warmup_init_lr = 0.1}, kRank);
  EXPECT_DOUBLE_EQ(from_lr0.at(1), 0.1 + 0.3 / 8);
  EXPECT_DOUBLE_EQ(from_lr0.at(6), 0.1 + 0.3 * 6 / 8);
  EXPECT_EQ(from_lr0.at(8), 0.4);
  // Fractional epochs: 1.5 epochs are 6 steps.
  const LrSchedule fractional(0.6, {.warmup_epochs = 1.5}, kRank);
  EXPECT_DOUBLE_EQ(fractional.at(3), 0.3);
  EXPECT_EQ(fractional.at(6), 0.6);
}

// The ResNet-20 setting's lr / 10 at epochs 150 and 225, S = 4: step t is at epoch t / 4,
// so the first decayed step is t = 600 (epoch 150.0), the second t = 900.
TEST(LrSchedule, MultistepDividesExactlyAtEachMilestone) {
  const LrSchedule s(0.1, {.type = "multistep", .settings = MultistepSettings{.milestones = {150, 225}, .gamma = 0.1}}, kRank);
  EXPECT_EQ(s.at(1), 0.1);
  EXPECT_EQ(s.at(599), 0.1);
  EXPECT_EQ(s.at(600), 0.1 * 0.1);
  EXPECT_EQ(s.at(601), 0.1 * 0.1);
  EXPECT_EQ(s.at(899), 0.1 * 0.1);
  EXPECT_EQ(s.at(900), 0.1 * 0.1 * 0.1);
  EXPECT_EQ(s.at(100000), 0.1 * 0.1 * 0.1);
  // With 5 warm-up epochs (20 steps) first, from 0.
  const LrSchedule warmed(0.1, {.type = "multistep", .warmup_epochs = 5, .settings = MultistepSettings{.milestones = {150, 225}}}, kRank);
  EXPECT_DOUBLE_EQ(warmed.at(10), 0.1 * 10 / 20);
  EXPECT_EQ(warmed.at(20), 0.1);
  EXPECT_EQ(warmed.at(600), 0.1 * 0.1);
  // A fractional milestone: epoch 2.5 is step 10; gamma 0.5.
  const LrSchedule half(0.8, {.type = "multistep", .settings = MultistepSettings{.milestones = {2.5}, .gamma = 0.5}}, kRank);
  EXPECT_EQ(half.at(9), 0.8);
  EXPECT_EQ(half.at(10), 0.4);
}

double cosine(double lr, double lr_min, double p) { return lr_min + (lr - lr_min) * (1 + std::cos(std::numbers::pi * p)) / 2; }

TEST(LrSchedule, CosineRunsFromTheLrToLrMinOverTheRunOrTotalEpochs) {
  // Over the run's 100 steps: lr_min at the last step, halfway at step 50.
  const LrScheduleRank run100{.shard_samples = 100, .batch_size = 32, .run_steps = 100};
  const LrSchedule over_run(1.0, {.type = "cosine", .settings = CosineSettings{.lr_min = 0.1}}, run100);
  EXPECT_DOUBLE_EQ(over_run.at(1), cosine(1.0, 0.1, 0.01));
  EXPECT_DOUBLE_EQ(over_run.at(50), 0.55);
  EXPECT_DOUBLE_EQ(over_run.at(100), 0.1);
  EXPECT_DOUBLE_EQ(over_run.at(150), 0.1);  // past T it stays at lr_min
  // Over 10 epochs (T = 40 steps), default lr_min 0.
  const LrSchedule over_epochs(1.0, {.type = "cosine", .settings = CosineSettings{.total_epochs = 10}}, kRank);
  EXPECT_DOUBLE_EQ(over_epochs.at(20), 0.5);
  EXPECT_DOUBLE_EQ(over_epochs.at(30), cosine(1.0, 0.0, 0.75));
  EXPECT_NEAR(over_epochs.at(40), 0.0, 1e-16);
  // After a 2-epoch warm-up (W = 8), the cosine runs over the remaining 32 steps.
  const LrSchedule warmed(1.0, {.type = "cosine", .warmup_epochs = 2, .settings = CosineSettings{.total_epochs = 10}}, kRank);
  EXPECT_DOUBLE_EQ(warmed.at(4), 0.5);  // warm-up from 0 to m(W) = 1
  EXPECT_EQ(warmed.at(8), 1.0);
  EXPECT_DOUBLE_EQ(warmed.at(24), 0.5);  // p = (24 - 8) / 32
  EXPECT_NEAR(warmed.at(40), 0.0, 1e-16);
}

// The convex experiments' lr = 0.1 / (lambda (t + d)) with lambda = 1/N and t the iteration
// from 0: a = 0.1 N, b = d. N = 1000, d = 5: step 1 (iteration 0) at 100 / 5.
TEST(LrSchedule, ConvexDecayIsAOverIterationPlusB) {
  const LrSchedule s(0.0, {.type = "convex_decay", .settings = ConvexDecaySettings{.a = 100, .b = 5}}, kRank);
  EXPECT_DOUBLE_EQ(s.at(1), 20.0);
  EXPECT_DOUBLE_EQ(s.at(2), 100.0 / 6);
  EXPECT_DOUBLE_EQ(s.at(11), 100.0 / 15);
  // It counts no epochs: a workload without data can follow it.
  EXPECT_DOUBLE_EQ(LrSchedule(0.0, {.type = "convex_decay", .settings = ConvexDecaySettings{.a = 1, .b = 1}}, {}).at(3), 1.0 / 3);
}

// The ResNet-20 setting: lr 0.1 tuned for batch 24, batch 128 per rank on a ring (3 in the
// neighbourhood): 0.1 / 24 * 128 * 3 = 1.6, warmed up from 0.1.
TEST(LrSchedule, GraphScaleUpMultipliesByTheNeighbourhoodAndTheBatchRatio) {
  const LrScheduleSpec spec{.warmup_epochs = 5, .warmup_init_lr = 0.1, .scaleup = algorithms::LrScaleup::graph, .base_batch_size = 24};
  const LrSchedule ring(0.1, spec, {.shard_samples = 6250, .batch_size = 128, .neighborhood = 3});
  EXPECT_DOUBLE_EQ(ring.peak(), 1.6);
  EXPECT_EQ(ring.steps_per_epoch(), 49.0);  // ceil(6250 / 128)
  EXPECT_DOUBLE_EQ(ring.at(49), 0.1 + 1.5 / 5);  // one epoch into the warm-up
  EXPECT_EQ(ring.at(245), ring.peak());
  const LrSchedule complete8(0.1, spec, {.shard_samples = 6250, .batch_size = 128, .neighborhood = 8});
  EXPECT_DOUBLE_EQ(complete8.peak(), 0.1 / 24 * 128 * 8);
}

TEST(LrSchedule, RefusesWhatTheWorkloadCannotProvide) {
  const LrScheduleRank no_data{.shard_samples = 0, .batch_size = 8, .run_steps = 10};
  EXPECT_THROW(LrSchedule(0.1, {.warmup_epochs = 1}, no_data), std::invalid_argument);
  EXPECT_THROW(LrSchedule(0.1, {.type = "multistep", .settings = MultistepSettings{.milestones = {1}}}, no_data), std::invalid_argument);
  EXPECT_NO_THROW(LrSchedule(0.1, {.type = "cosine"}, no_data));  // over the run's steps
  EXPECT_THROW(LrSchedule(0.1, {.scaleup = algorithms::LrScaleup::graph, .base_batch_size = 8}, {}), std::invalid_argument);
  // A cosine over the run's 10 steps cannot follow a warm-up of 3 epochs x 4 steps.
  EXPECT_THROW(LrSchedule(0.1, {.type = "cosine", .warmup_epochs = 3}, {.shard_samples = 100, .batch_size = 32, .run_steps = 10}),
               std::invalid_argument);
}

// --- The scenario syntax ---------------------------------------------------------------

json scenario_doc(json lr_schedule, json algorithm = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.2}},
                  json workload = {{"type", "logistic_regression"}, {"samples", 512}, {"features", 8}, {"batch_size", 32}},
                  const std::string& topology = "ring", int ranks = 4, int steps = 12) {
  if (!lr_schedule.is_null()) algorithm["lr_schedule"] = std::move(lr_schedule);
  return {{"name", "lr"},
          {"ranks", ranks},
          {"steps", steps},
          {"seed", 7},
          {"workload", std::move(workload)},
          {"algorithm", std::move(algorithm)},
          {"topology", {{"kind", topology}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 2}, {"bandwidth_GBps", 1}}}};
}

TEST(LrScheduleScenario, ParsesEachTypeAndEchoesEveryFieldWithItsDefault) {
  const auto multistep = runner::parse_scenario(scenario_doc({{"type", "multistep"}, {"milestones", {150, 225}}}));
  const auto& m = multistep.algorithm.optimizer.lr_schedule;
  EXPECT_EQ(m.type, "multistep");
  EXPECT_EQ(lr_schedule_settings<MultistepSettings>(m).milestones, (std::vector<double>{150, 225}));
  EXPECT_EQ(lr_schedule_settings<MultistepSettings>(m).gamma, 0.1);
  EXPECT_EQ(multistep.to_json()["algorithm"]["lr_schedule"],
            (json{{"type", "multistep"}, {"warmup_epochs", 0.0}, {"warmup_init_lr", 0.0}, {"lr_scaleup", {{"factor", "none"}}},
                  {"milestones", {150.0, 225.0}}, {"gamma", 0.1}}));
  // A graph scale-up's warm-up starts from the unscaled lr by default, as the reference's.
  const auto scaled = runner::parse_scenario(scenario_doc(
      {{"warmup_epochs", 5}, {"lr_scaleup", {{"factor", "graph"}, {"base_batch_size", 24}}}}));
  EXPECT_EQ(scaled.algorithm.optimizer.lr_schedule.warmup_init_lr, 0.2);
  EXPECT_EQ(scaled.to_json()["algorithm"]["lr_schedule"]["lr_scaleup"], (json{{"factor", "graph"}, {"base_batch_size", 24}}));
  const auto cosine = runner::parse_scenario(scenario_doc({{"type", "cosine"}, {"lr_min", 0.01}}));
  EXPECT_FALSE(cosine.to_json()["algorithm"]["lr_schedule"].contains("total_epochs"));  // absent: the run's steps
  const auto convex = runner::parse_scenario(scenario_doc({{"type", "convex_decay"}, {"a", 40000}, {"b", 10}}));
  const auto& decay = lr_schedule_settings<ConvexDecaySettings>(convex.algorithm.optimizer.lr_schedule);
  EXPECT_EQ(decay.a, 40000);
  EXPECT_EQ(decay.b, 10);
}

// parse -> to_json -> parse gives the same echo, for every type with every field set.
TEST(LrScheduleScenario, RoundTripsThroughToJson) {
  const std::vector<json> schedules{
      {{"type", "constant"}, {"warmup_epochs", 2}},
      {{"type", "multistep"}, {"milestones", {1, 2.5, 4}}, {"gamma", 0.5}, {"warmup_epochs", 0.5}, {"warmup_init_lr", 0.01}},
      {{"type", "cosine"}, {"total_epochs", 8}, {"lr_min", 0.001}, {"lr_scaleup", {{"factor", "graph"}, {"base_batch_size", 64}}}},
      {{"type", "convex_decay"}, {"a", 3}, {"b", 0.5}}};
  for (const auto& schedule : schedules) {
    SCOPED_TRACE(schedule.dump());
    const json once = runner::parse_scenario(scenario_doc(schedule)).to_json();
    ASSERT_TRUE(once["algorithm"].contains("lr_schedule"));
    EXPECT_EQ(runner::parse_scenario(once).to_json(), once);
  }
}

// No schedule, or the default one written out: the echo has no lr_schedule, so existing
// scenarios, their results and their sweep point ids are unchanged.
TEST(LrScheduleScenario, TheDefaultIsLeftOutOfTheEcho) {
  const json absent = runner::parse_scenario(scenario_doc(nullptr)).to_json();
  EXPECT_FALSE(absent["algorithm"].contains("lr_schedule"));
  EXPECT_EQ(runner::parse_scenario(scenario_doc({{"type", "constant"}, {"lr_scaleup", {{"factor", "none"}}}})).to_json(), absent);
}

// Each mistake is one line naming the JSON Pointer of the value at fault.
TEST(LrScheduleScenario, ErrorsNameTheirJsonPath) {
  struct Case {
    json schedule;
    std::string path;
    runner::ErrorKind kind;
  };
  const std::vector<Case> cases{
      {{{"type", "step"}}, "/algorithm/lr_schedule/type", runner::ErrorKind::unknown_name},
      {{{"type", "multistep"}, {"milestones", {150, 100}}}, "/algorithm/lr_schedule/milestones/1", runner::ErrorKind::inconsistent},
      {{{"type", "multistep"}, {"milestones", {150, 150}}}, "/algorithm/lr_schedule/milestones/1", runner::ErrorKind::inconsistent},
      {{{"type", "multistep"}, {"milestones", {-1, 150}}}, "/algorithm/lr_schedule/milestones/0", runner::ErrorKind::out_of_range},
      {{{"type", "multistep"}, {"milestones", json::array()}}, "/algorithm/lr_schedule/milestones", runner::ErrorKind::wrong_type},
      {{{"type", "multistep"}}, "/algorithm/lr_schedule/milestones", runner::ErrorKind::missing_field},
      {{{"warmup_epochs", -5}}, "/algorithm/lr_schedule/warmup_epochs", runner::ErrorKind::out_of_range},
      {{{"type", "cosine"}, {"total_epochs", -1}}, "/algorithm/lr_schedule/total_epochs", runner::ErrorKind::out_of_range},
      {{{"type", "cosine"}, {"total_epochs", 5}, {"warmup_epochs", 5}}, "/algorithm/lr_schedule/total_epochs",
       runner::ErrorKind::inconsistent},
      {{{"type", "cosine"}, {"gamma", 0.5}}, "/algorithm/lr_schedule/gamma", runner::ErrorKind::unknown_field},
      {{{"type", "convex_decay"}, {"a", 1}}, "/algorithm/lr_schedule/b", runner::ErrorKind::missing_field},
      {{{"type", "convex_decay"}, {"a", 1}, {"b", 1}, {"lr_scaleup", {{"factor", "graph"}, {"base_batch_size", 8}}}},
       "/algorithm/lr_schedule/lr_scaleup", runner::ErrorKind::inconsistent},
      {{{"lr_scaleup", {{"factor", "graph"}}}}, "/algorithm/lr_schedule/lr_scaleup/base_batch_size", runner::ErrorKind::missing_field},
      {{{"lr_scaleup", {{"factor", "world"}}}}, "/algorithm/lr_schedule/lr_scaleup/factor", runner::ErrorKind::unknown_name},
      {{{"lr_scaleup", {{"base_batch_size", 8}}}}, "/algorithm/lr_schedule/lr_scaleup/base_batch_size",
       runner::ErrorKind::unknown_field},
      {json::array(), "/algorithm/lr_schedule", runner::ErrorKind::wrong_type}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.schedule.dump());
    try {
      runner::parse_scenario(scenario_doc(c.schedule));
      ADD_FAILURE() << "accepted";
    } catch (const runner::ScenarioError& e) {
      EXPECT_EQ(e.path(), c.path) << e.what();
      EXPECT_EQ(e.kind(), c.kind) << e.what();
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(c.path + ": ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

// --- Whole runs -----------------------------------------------------------------------

// The minimal fields of each algorithm for a logistic-regression run.
json algorithm_doc(const std::string& name, double lr) {
  json a = {{"name", name}, {"lr", lr}};
  if (name == "parallel_sgd") a["variant"] = "decentralized";
  if (name == "sparsified_sgd") a["compressor"] = {{"kind", "top_k"}, {"ratio", 0.5}};
  return a;
}

// Every algorithm, with a multistep schedule halving the lr at epoch 2 (S = ceil(128 / 32)
// = 4 steps per epoch on 4 ranks of 512 samples: from step 8), follows the constant-lr run
// exactly up to step 8 and leaves it at once: the forward loss of step t sees the first
// t - 1 updates, so losses 1..8 agree bit for bit and loss 9 differs.
TEST(LrScheduleRuns, MultistepChangesEveryAlgorithmsTrajectoryExactlyAtTheMilestone) {
  for (const auto* entry : algorithms::algorithm_entries()) {
    SCOPED_TRACE(entry->name);
    const double lr = entry->name.find("sign") != std::string::npos && entry->name.find("ef") == std::string::npos ? 0.01 : 0.2;
    const auto constant = runner::run_emulated(runner::parse_scenario(scenario_doc(nullptr, algorithm_doc(entry->name, lr))));
    const auto decayed = runner::run_emulated(runner::parse_scenario(
        scenario_doc({{"type", "multistep"}, {"milestones", {2}}, {"gamma", 0.5}}, algorithm_doc(entry->name, lr))));
    ASSERT_EQ(decayed.loss.size(), 12u);
    for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(decayed.loss[i], constant.loss[i]) << "step " << i + 1;
    EXPECT_NE(decayed.loss[8], constant.loss[8]);
    EXPECT_TRUE(constant.lr.empty());
    ASSERT_EQ(decayed.lr.size(), 12u);
    for (std::size_t i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(decayed.lr[i], i + 1 < 8 ? lr : lr / 2) << "step " << i + 1;
  }
}

// The per-step record: "lr" in per_step only when a schedule is set; a default-schedule run
// writes the same result as before schedules existed (nothing added).
TEST(LrScheduleRuns, ResultsRecordTheLrPerStepOnlyWithASchedule) {
  const auto plain = runner::run_emulated(runner::parse_scenario(scenario_doc(nullptr))).to_json();
  EXPECT_FALSE(plain["per_step"].contains("lr"));
  EXPECT_EQ(runner::run_emulated(runner::parse_scenario(scenario_doc({{"type", "constant"}}))).to_json().dump(), plain.dump());
  const auto warmed =
      runner::run_emulated(runner::parse_scenario(scenario_doc({{"warmup_epochs", 1}}))).to_json();  // S = 4
  ASSERT_TRUE(warmed["per_step"].contains("lr"));
  const auto& lr = warmed["per_step"]["lr"];
  ASSERT_EQ(lr.size(), 12u);
  EXPECT_DOUBLE_EQ(lr[0].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(lr[2].get<double>(), 0.15);
  EXPECT_DOUBLE_EQ(lr[3].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(lr[11].get<double>(), 0.2);
}

// Full batch is one step per epoch: milestone 3 is step 3.
TEST(LrScheduleRuns, FullBatchCountsOneStepPerEpoch) {
  const auto r = runner::run_emulated(runner::parse_scenario(
      scenario_doc({{"type", "multistep"}, {"milestones", {3}}}, {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.2}},
                   {{"type", "logistic_regression"}, {"samples", 512}, {"features", 8}, {"batch_size", "full"}})));
  ASSERT_EQ(r.lr.size(), 12u);
  EXPECT_DOUBLE_EQ(r.lr[1], 0.2);
  EXPECT_DOUBLE_EQ(r.lr[2], 0.02);
}

// The scale-up from the topology: 3 on a ring of 8, 4 on a complete graph of 4; batch 32
// against base 64 halves it.
TEST(LrScheduleRuns, GraphScaleUpReadsTheNeighbourhoodFromTheTopology) {
  const json scaleup = {{"lr_scaleup", {{"factor", "graph"}, {"base_batch_size", 64}}}};
  const json algorithm = {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.2}};
  const json workload = {{"type", "logistic_regression"}, {"samples", 512}, {"features", 8}, {"batch_size", 32}};
  const auto ring = runner::run_emulated(runner::parse_scenario(scenario_doc(scaleup, algorithm, workload, "ring", 8, 3)));
  const auto complete = runner::run_emulated(runner::parse_scenario(scenario_doc(scaleup, algorithm, workload, "complete", 4, 3)));
  ASSERT_EQ(ring.lr.size(), 3u);
  ASSERT_EQ(complete.lr.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(ring.lr[i], 0.2 / 64 * 32 * 3);
    EXPECT_DOUBLE_EQ(complete.lr[i], 0.2 / 64 * 32 * 4);
  }
}

// The shape-only models have no data: a schedule counted in epochs is a scenario error
// before any rank starts; one that counts none runs.
TEST(LrScheduleRuns, EpochsOnAWorkloadWithoutDataAreAScenarioError) {
  const json algorithm = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}};
  const json shape = {{"type", "resnet20"}, {"batch_size", 4}};
  try {
    runner::run_emulated(runner::parse_scenario(scenario_doc({{"warmup_epochs", 1}}, algorithm, shape, "ring", 2, 1)));
    ADD_FAILURE() << "ran";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/algorithm/lr_schedule");
    EXPECT_NE(std::string(e.what()).find("resnet20"), std::string::npos) << e.what();
  }
  const auto r = runner::run_emulated(runner::parse_scenario(
      scenario_doc({{"type", "convex_decay"}, {"a", 1}, {"b", 2}}, algorithm, shape, "ring", 2, 2)));
  EXPECT_EQ(r.lr, (std::vector<double>{0.5, 1.0 / 3}));
}

// --- Weight decay and the reference's parameter groups ---------------------------------

// Tensors named "*bn*" take no weight decay; the rest do. p = 1, g = 0, lr 0.1, wd 0.5:
// decayed 1 - 0.1 * 0.5 = 0.95, skipped 1.
TEST(WeightDecay, SkipsTensorsWhoseNamesContainBn) {
  const std::vector<std::string> names{"conv1.weight", "bn1.weight", "layer1.0.bn2.bias", "fc.bias"};
  EXPECT_EQ(algorithms::weight_decay_mask(names), (std::vector<bool>{true, false, false, true}));
  algorithms::OptimizerSpec spec{.lr = 0.1, .weight_decay = 0.5};
  spec.weight_decay_mask = algorithms::weight_decay_mask(names);
  algorithms::LocalOptimizer opt(spec);
  std::vector<at::Tensor> p, g;
  for (std::size_t i = 0; i < names.size(); ++i) {
    p.push_back(at::ones({2}, at::kDouble));
    g.push_back(at::zeros({2}, at::kDouble));
  }
  opt.apply_gradient(p, g, 0.1);
  EXPECT_TRUE(at::equal(p[0], at::full({2}, 0.95, at::kDouble)));
  EXPECT_TRUE(at::equal(p[1], at::ones({2}, at::kDouble)));
  EXPECT_TRUE(at::equal(p[2], at::ones({2}, at::kDouble)));
  EXPECT_TRUE(at::equal(p[3], at::full({2}, 0.95, at::kDouble)));
  // The direction form skips them too: g = 0 stays 0 on bn tensors, becomes wd p elsewhere.
  algorithms::LocalOptimizer deferred(spec);
  deferred.transform_gradient(p, g);
  EXPECT_TRUE(at::equal(g[1], at::zeros({2}, at::kDouble)));
  EXPECT_TRUE(at::allclose(g[0], at::full({2}, 0.5 * 0.95, at::kDouble)));
  // A mask for another parameter list is a bug in the caller.
  spec.weight_decay_mask = {true};
  algorithms::LocalOptimizer wrong(spec);
  EXPECT_THROW(wrong.apply_gradient(p, g, 0.1), std::logic_error);
}

std::map<std::string, std::vector<double>> final_params(const json& doc, const std::string& name) {
  const auto dir = testing::fresh_dir("lr-wd-" + name);
  runner::RunOptions options;
  options.dump_params_prefix = dir / "params";
  runner::run_emulated(runner::parse_scenario(doc), options);
  return testing::read_json(dir / "params.rank0.json")["params"].get<std::map<std::string, std::vector<double>>>();
}

// In a run, the training loop gives every algorithm the mask from the workload's names:
// ResNet-20's (shape model) batch-norm tensors end equal with and without weight decay
// (its gradients do not depend on the parameters), the convolutions do not.
TEST(WeightDecay, RunsSkipTheBatchNormTensorsOfTheWorkload) {
  const json shape = {{"type", "resnet20"}, {"batch_size", 4}};
  for (const std::string name : {"parallel_sgd", "choco_sgd", "distopt"}) {
    SCOPED_TRACE(name);
    json algorithm = algorithm_doc(name, 0.1);
    if (name == "distopt") algorithm["variant"] = "partial";  // one optimizer per tensor
    const auto plain = final_params(scenario_doc(nullptr, algorithm, shape, "ring", 2, 2), name + "-plain");
    algorithm["weight_decay"] = 0.5;
    const auto decayed = final_params(scenario_doc(nullptr, algorithm, shape, "ring", 2, 2), name + "-decayed");
    ASSERT_EQ(plain.size(), 59u);
    int bn = 0;
    for (const auto& [tensor, values] : plain) {
      const bool is_bn = tensor.find("bn") != std::string::npos;
      bn += is_bn;
      if (is_bn)
        EXPECT_EQ(decayed.at(tensor), values) << tensor;
      else
        EXPECT_NE(decayed.at(tensor), values) << tensor;
    }
    EXPECT_EQ(bn, 38);  // weight and bias of the 19 batch norms
  }
}

}  // namespace
}  // namespace dtsim
