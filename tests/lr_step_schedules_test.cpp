// The language-model schedules counted in steps (no epochs needed, so they run on every
// workload, the shape-only models included), each checked against its closed form at every
// step, at the points where it changes shape, through the scenario syntax and errors, and in
// whole runs (the per-step lr a run records):
// - "warmup_cosine" (algorithms/lr_schedules/warmup_cosine.cpp): a linear warm-up over
//   warmup_steps to the peak, then a cosine to lr_min at total_steps (or the run's last step);
// - "wsd" (algorithms/lr_schedules/wsd.cpp): warm-up, stable at the peak, then the last
//   decay_fraction of the steps down to lr_min, linear, cosine or 1-sqrt.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/lr_schedule.hpp"
#include "algorithms/lr_schedules/warmup_cosine.hpp"
#include "algorithms/lr_schedules/wsd.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"

namespace dtsim {
namespace {

using algorithms::LrSchedule;
using algorithms::LrScheduleSpec;
using algorithms::lr_schedule_settings;
using algorithms::WarmupCosineSettings;
using algorithms::WsdSettings;
using nlohmann::json;

// The closed form, written out independently of the implementation.
double closed_form(double t, double peak, double lr0, double lr_min, double W, double T) {
  if (t <= W) return lr0 + (peak - lr0) * t / W;
  if (t >= T) return lr_min;
  return lr_min + 0.5 * (peak - lr_min) * (1.0 + std::cos(std::numbers::pi * (t - W) / (T - W)));
}

TEST(LrWarmupCosine, FollowsTheClosedFormAtEveryStep) {
  const LrScheduleSpec spec{.type = "warmup_cosine", .warmup_init_lr = 0.0,
                            .settings = WarmupCosineSettings{.span = {.warmup_steps = 100, .total_steps = 0}, .lr_min = 6e-5}};
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
  const LrSchedule own(1.0, {.type = "warmup_cosine", .warmup_init_lr = 0.1,
                             .settings = WarmupCosineSettings{.span = {.warmup_steps = 10, .total_steps = 50}}},
                       {.run_steps = 1000});
  for (std::int64_t t = 1; t <= 60; ++t)
    EXPECT_NEAR(own.at(t), closed_form(static_cast<double>(t), 1.0, 0.1, 0.0, 10, 50), 1e-15) << "step " << t;
  const LrSchedule none(1.0, {.type = "warmup_cosine"}, {.run_steps = 20});
  for (std::int64_t t = 1; t <= 20; ++t)
    EXPECT_NEAR(none.at(t), 0.5 * (1.0 + std::cos(std::numbers::pi * static_cast<double>(t) / 20.0)), 1e-15);
  EXPECT_THROW(LrSchedule(1.0, {.type = "warmup_cosine", .settings = WarmupCosineSettings{.span = {.warmup_steps = 20}}}, {.run_steps = 20}),
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

// The JSON Pointer a schedule's one-line scenario error names ("accepted" if none).
std::string error_path(const json& schedule) {
  try {
    runner::parse_scenario(scenario_doc(schedule, kLogistic));
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    return e.path();
  }
  return "accepted";
}

TEST(LrWarmupCosine, ScenarioSyntaxEchoAndErrors) {
  const json schedule = {{"type", "warmup_cosine"}, {"warmup_steps", 3}, {"lr_min", 0.05}};
  const auto s = runner::parse_scenario(scenario_doc(schedule, kLogistic));
  const auto& l = s.algorithm.optimizer.lr_schedule;
  EXPECT_EQ(l.type, "warmup_cosine");
  const auto& own = lr_schedule_settings<WarmupCosineSettings>(l);
  EXPECT_EQ(own.span.warmup_steps, 3);
  EXPECT_EQ(own.span.total_steps, 0);
  EXPECT_EQ(own.lr_min, 0.05);
  const json echo = s.to_json();
  EXPECT_EQ(echo["algorithm"]["lr_schedule"],
            (json{{"type", "warmup_cosine"}, {"warmup_epochs", 0.0}, {"warmup_init_lr", 0.0},
                  {"lr_scaleup", {{"factor", "none"}}}, {"warmup_steps", 3}, {"total_steps", 0}, {"lr_min", 0.05}}));
  EXPECT_EQ(runner::parse_scenario(echo).to_json(), echo);
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

// --- wsd ----------------------------------------------------------------------------------

// The closed form (Hagele et al. 2024, eq. for the WSD schedule), written out independently:
// warm-up to t = W, the peak to T0 = T - D, then lr_min + (L - lr_min) g((t - T0) / D).
double wsd_closed_form(double t, double peak, double lr0, double lr_min, double W, double T, double fraction,
                       const std::string& shape) {
  const double D = fraction * T, T0 = T - D;
  if (t <= W) return lr0 + (peak - lr0) * t / W;
  if (t <= T0) return peak;
  const double p = t >= T ? 1.0 : (t - T0) / D;
  const double g = shape == "linear" ? 1.0 - p : shape == "cosine" ? 0.5 * (1.0 + std::cos(std::numbers::pi * p)) : 1.0 - std::sqrt(p);
  return lr_min + (peak - lr_min) * g;
}

TEST(LrWsd, FollowsTheClosedFormForEachDecayShape) {
  for (const std::string shape : {"linear", "cosine", "1-sqrt"}) {
    SCOPED_TRACE(shape);
    const LrSchedule s(1e-3,
                       {.type = "wsd",
                        .settings = WsdSettings{.span = {.warmup_steps = 50}, .decay_fraction = 0.2, .decay_shape = shape, .lr_min = 1e-5}},
                       {.run_steps = 1000});
    for (std::int64_t t = 1; t <= 1100; ++t)
      EXPECT_NEAR(s.at(t), wsd_closed_form(static_cast<double>(t), 1e-3, 0.0, 1e-5, 50, 1000, 0.2, shape), 1e-18)
          << "step " << t;
    // Its shape: the peak from step W to the decay's start at T0 = 800, lr_min from T on.
    EXPECT_DOUBLE_EQ(s.at(25), 5e-4);
    for (std::int64_t t = 50; t <= 800; ++t) EXPECT_EQ(s.at(t), 1e-3) << "step " << t;
    EXPECT_LT(s.at(801), 1e-3);
    for (std::int64_t t = 801; t < 1000; ++t) EXPECT_LT(s.at(t + 1), s.at(t)) << "step " << t;
    EXPECT_DOUBLE_EQ(s.at(1000), 1e-5);
    EXPECT_DOUBLE_EQ(s.at(1200), 1e-5);
  }
  // Halfway through the decay (p = 1/2): linear 1/2, cosine 1/2, 1-sqrt 1 - 1/sqrt(2).
  auto halfway = [](const std::string& shape) {
    return LrSchedule(1.0, {.type = "wsd", .settings = WsdSettings{.span = {.total_steps = 100}, .decay_fraction = 0.5, .decay_shape = shape}},
                      {.run_steps = 10})
        .at(75);
  };
  EXPECT_DOUBLE_EQ(halfway("linear"), 0.5);
  EXPECT_DOUBLE_EQ(halfway("cosine"), 0.5);
  EXPECT_DOUBLE_EQ(halfway("1-sqrt"), 1.0 - std::sqrt(0.5));
  // A decay over the whole run with no warm-up starts at step 0: step 1 is already below L.
  const LrSchedule whole(1.0, {.type = "wsd", .settings = WsdSettings{.decay_fraction = 1.0, .decay_shape = "linear"}},
                         {.run_steps = 10});
  EXPECT_DOUBLE_EQ(whole.at(1), 0.9);
  // The run's steps cannot hold the warm-up before the decay.
  EXPECT_THROW(LrSchedule(1.0, {.type = "wsd", .settings = WsdSettings{.span = {.warmup_steps = 9}}}, {.run_steps = 10}),
               std::invalid_argument);
}

TEST(LrWsd, ScenarioSyntaxEchoAndErrors) {
  const json schedule = {{"type", "wsd"}, {"warmup_steps", 2}, {"decay_fraction", 0.25}, {"decay_shape", "cosine"}};
  const auto s = runner::parse_scenario(scenario_doc(schedule, kLogistic));
  const auto& own = lr_schedule_settings<WsdSettings>(s.algorithm.optimizer.lr_schedule);
  EXPECT_EQ(own.span.warmup_steps, 2);
  EXPECT_EQ(own.decay_fraction, 0.25);
  EXPECT_EQ(own.decay_shape, "cosine");
  const json echo = s.to_json();
  EXPECT_EQ(echo["algorithm"]["lr_schedule"],
            (json{{"type", "wsd"}, {"warmup_epochs", 0.0}, {"warmup_init_lr", 0.0}, {"lr_scaleup", {{"factor", "none"}}},
                  {"warmup_steps", 2}, {"total_steps", 0}, {"decay_fraction", 0.25}, {"decay_shape", "cosine"},
                  {"lr_min", 0.0}}));
  EXPECT_EQ(runner::parse_scenario(echo).to_json(), echo);
  EXPECT_EQ(lr_schedule_settings<WsdSettings>(runner::parse_scenario(scenario_doc({{"type", "wsd"}}, kLogistic))
                                                  .algorithm.optimizer.lr_schedule)
                .decay_shape,
            "1-sqrt");  // the paper's best cooldown, the default
  EXPECT_EQ(error_path({{"type", "wsd"}, {"warmup_epochs", 1}}), "/algorithm/lr_schedule/warmup_epochs");
  EXPECT_EQ(error_path({{"type", "wsd"}, {"decay_fraction", 0}}), "/algorithm/lr_schedule/decay_fraction");
  EXPECT_EQ(error_path({{"type", "wsd"}, {"decay_fraction", 1.5}}), "/algorithm/lr_schedule/decay_fraction");
  EXPECT_EQ(error_path({{"type", "wsd"}, {"decay_shape", "exponential"}}), "/algorithm/lr_schedule/decay_shape");
  EXPECT_EQ(error_path({{"type", "wsd"}, {"warmup_steps", 10}, {"total_steps", 10}}), "/algorithm/lr_schedule/total_steps");
  // The decay of 0.5 x 20 steps would start at step 10, inside a 12-step warm-up.
  EXPECT_EQ(error_path({{"type", "wsd"}, {"warmup_steps", 12}, {"total_steps", 20}, {"decay_fraction", 0.5}}),
            "/algorithm/lr_schedule/decay_fraction");
  EXPECT_EQ(error_path({{"type", "wsd"}, {"milestones", {1}}}), "/algorithm/lr_schedule/milestones");
  // Over the run's 12 steps, a warm-up of 11 leaves no room for 20 % of decay: refused at load.
  try {
    runner::run_emulated(runner::parse_scenario(scenario_doc({{"type", "wsd"}, {"warmup_steps", 11}}, kLogistic)));
    ADD_FAILURE() << "accepted";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/algorithm/lr_schedule") << e.what();
  }
}

TEST(LrWsd, RunsRecordTheClosedForm) {
  const json schedule = {{"type", "wsd"}, {"warmup_steps", 3}, {"decay_fraction", 0.5}, {"lr_min", 0.05}};
  const json shape_only = {{"type", "resnet20"}, {"batch_size", 2}};
  for (const auto& workload : {kLogistic, shape_only}) {
    const auto r = runner::run_emulated(runner::parse_scenario(scenario_doc(schedule, workload, 12)));
    ASSERT_EQ(r.lr.size(), 12u) << workload.dump();
    for (std::size_t t = 0; t < 12; ++t)
      EXPECT_NEAR(r.lr[t], wsd_closed_form(static_cast<double>(t + 1), 0.5, 0.0, 0.05, 3, 12, 0.5, "1-sqrt"), 1e-15)
          << workload["type"] << " step " << t + 1;
  }
}

}  // namespace
}  // namespace dtsim
