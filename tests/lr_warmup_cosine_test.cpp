// algorithm.lr_schedule "warmup_cosine", the language-model default (algorithms/lr_warmup_cosine.hpp):
// a linear warm-up over warmup_steps to the peak, then a cosine to lr_min at total_steps (or
// the run's last step), counted in steps. Checked against its closed form at every step of a
// run, at the points where it changes shape, through the scenario syntax and errors, and in a
// whole run (the per-step lr a run records), on a workload with data and on a shape-only one
// (no epochs needed).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/lr_schedule.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"

namespace dtsim {
namespace {

using algorithms::LrSchedule;
using algorithms::LrScheduleSpec;
using algorithms::LrScheduleType;
using nlohmann::json;

// The closed form, written out independently of the implementation.
double closed_form(double t, double peak, double lr0, double lr_min, double W, double T) {
  if (t <= W) return lr0 + (peak - lr0) * t / W;
  if (t >= T) return lr_min;
  return lr_min + 0.5 * (peak - lr_min) * (1.0 + std::cos(std::numbers::pi * (t - W) / (T - W)));
}

TEST(LrWarmupCosine, FollowsTheClosedFormAtEveryStep) {
  const LrScheduleSpec spec{.type = LrScheduleType::warmup_cosine, .warmup_init_lr = 0.0, .lr_min = 6e-5,
                            .warmup_steps = 100, .total_steps = 0};
  const LrSchedule s(6e-4, spec, {.run_steps = 1000});  // no data needed: steps only
  for (std::int64_t t = 1; t <= 1100; ++t)
    EXPECT_NEAR(s.at(t), closed_form(static_cast<double>(t), 6e-4, 0.0, 6e-5, 100, 1000), 1e-18) << "step " << t;
  // Its shape: 1/W of the peak at step 1, the peak at step W, the midpoint halfway through the
  // decay, lr_min at the run's last step and after.
  EXPECT_DOUBLE_EQ(s.at(1), 6e-6);
  EXPECT_DOUBLE_EQ(s.at(100), 6e-4);
  EXPECT_NEAR(s.at(550), (6e-4 + 6e-5) / 2, 1e-18);
  EXPECT_DOUBLE_EQ(s.at(1000), 6e-5);
  EXPECT_DOUBLE_EQ(s.at(1500), 6e-5);
  for (std::int64_t t = 101; t < 1000; ++t) EXPECT_LT(s.at(t + 1), s.at(t));  // decays monotonically
  // total_steps instead of the run's; a starting lr; no warm-up at all.
  const LrSchedule own(1.0, {.type = LrScheduleType::warmup_cosine, .warmup_init_lr = 0.1, .warmup_steps = 10,
                             .total_steps = 50},
                       {.run_steps = 1000});
  for (std::int64_t t = 1; t <= 60; ++t)
    EXPECT_NEAR(own.at(t), closed_form(static_cast<double>(t), 1.0, 0.1, 0.0, 10, 50), 1e-15) << "step " << t;
  const LrSchedule none(1.0, {.type = LrScheduleType::warmup_cosine}, {.run_steps = 20});
  for (std::int64_t t = 1; t <= 20; ++t)
    EXPECT_NEAR(none.at(t), 0.5 * (1.0 + std::cos(std::numbers::pi * static_cast<double>(t) / 20.0)), 1e-15);
  EXPECT_THROW(LrSchedule(1.0, {.type = LrScheduleType::warmup_cosine, .warmup_steps = 20}, {.run_steps = 20}),
               std::invalid_argument);
}

json scenario_doc(const json& schedule, const json& workload, int steps = 12) {
  return {{"name", "lr"},
          {"ranks", 2},
          {"steps", steps},
          {"seed", 7},
          {"workload", workload},
          {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.5}, {"lr_schedule", schedule}}},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 2}, {"bandwidth_GBps", 1}}}};
}

const json kLogistic = {{"type", "logistic_regression"}, {"samples", 256}, {"features", 4}, {"batch_size", 16}};

TEST(LrWarmupCosine, ScenarioSyntaxEchoAndErrors) {
  const json schedule = {{"type", "warmup_cosine"}, {"warmup_steps", 3}, {"lr_min", 0.05}};
  const auto s = runner::parse_scenario(scenario_doc(schedule, kLogistic));
  const auto& l = s.algorithm.optimizer.lr_schedule;
  EXPECT_EQ(l.type, LrScheduleType::warmup_cosine);
  EXPECT_EQ(l.warmup_steps, 3);
  EXPECT_EQ(l.total_steps, 0);
  EXPECT_EQ(l.lr_min, 0.05);
  const json echo = s.to_json();
  EXPECT_EQ(echo["algorithm"]["lr_schedule"],
            (json{{"type", "warmup_cosine"}, {"warmup_epochs", 0.0}, {"warmup_init_lr", 0.0},
                  {"lr_scaleup", {{"factor", "none"}}}, {"warmup_steps", 3}, {"total_steps", 0}, {"lr_min", 0.05}}));
  EXPECT_EQ(runner::parse_scenario(echo).to_json(), echo);
  auto error_path = [&](const json& bad) -> std::string {
    try {
      runner::parse_scenario(scenario_doc(bad, kLogistic));
    } catch (const runner::ScenarioError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      return e.path();
    }
    return "accepted";
  };
  EXPECT_EQ(error_path({{"type", "warmup_cosine"}, {"warmup_epochs", 1}}), "/algorithm/lr_schedule/warmup_epochs");
  EXPECT_EQ(error_path({{"type", "warmup_cosine"}, {"warmup_steps", 5}, {"total_steps", 5}}),
            "/algorithm/lr_schedule/total_steps");
  EXPECT_EQ(error_path({{"type", "warmup_cosine"}, {"warmup_steps", -1}}), "/algorithm/lr_schedule/warmup_steps");
  EXPECT_EQ(error_path({{"type", "cosine"}, {"warmup_steps", 2}}), "/algorithm/lr_schedule/warmup_steps");
  EXPECT_EQ(error_path({{"type", "warmup_cosine"}, {"milestones", {1}}}), "/algorithm/lr_schedule/milestones");
}

// A run records each step's lr: the closed form, on a workload with data and on a shape-only
// model (which has no epochs to count, and needs none here).
TEST(LrWarmupCosine, RunsRecordTheClosedForm) {
  const json schedule = {{"type", "warmup_cosine"}, {"warmup_steps", 4}, {"lr_min", 0.05}};
  const json shape_only = {{"type", "resnet20"}, {"batch_size", 2}};
  for (const auto& workload : {kLogistic, shape_only}) {
    const auto r = runner::run_emulated(runner::parse_scenario(scenario_doc(schedule, workload, 12)));
    ASSERT_EQ(r.lr.size(), 12u) << workload.dump();
    for (std::size_t t = 0; t < 12; ++t)
      EXPECT_NEAR(r.lr[t], closed_form(static_cast<double>(t + 1), 0.5, 0.0, 0.05, 4, 12), 1e-15)
          << workload["type"] << " step " << t + 1;
  }
}

}  // namespace
}  // namespace dtsim
