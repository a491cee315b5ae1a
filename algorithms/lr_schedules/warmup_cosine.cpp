// lr_schedule "warmup_cosine", the language-model default: a linear warm-up over W steps,
// then a cosine decay to lr_min at step T, counted in steps (no epochs, so it runs on every
// workload, the shape-only models included). Step t from 1:
//
//   t <= W:        lr_t = lr_0 + (L - lr_0) t / W              (reaches the peak L at t = W)
//   W < t <= T:    lr_t = lr_min + (L - lr_min) (1 + cos(pi (t - W) / (T - W))) / 2
//   t > T:         lr_t = lr_min
//
// lr_0 = warmup_init_lr (default 0), L the peak (lr, times a scale-up), T = total_steps or the
// run's steps (T > W). W = 0: no warm-up, the decay runs from step 1 (at t / T).
// As nanoGPT's get_lr and the DiLoCo papers' inner schedule, counted from step 1. Its
// warm-up is its own, in steps: warmup_epochs must stay 0.
#include "algorithms/lr_schedules/warmup_cosine.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

namespace {

const WarmupCosineSettings& settings(const LrScheduleSpec& s) { return lr_schedule_settings<WarmupCosineSettings>(s); }

void parse(config::ObjectReader& o, LrScheduleSpec& spec) {
  if (spec.warmup_epochs != 0.0)
    throw config::ScenarioError(o.where("warmup_epochs"), config::ErrorKind::inconsistent,
                                "warmup_cosine counts its warm-up in steps: set warmup_steps instead");
  WarmupCosineSettings s;
  s.warmup_steps = o.integer("warmup_steps", s.warmup_steps, 0, config::kIntMax);
  s.total_steps = o.integer("total_steps", s.total_steps, 0, config::kIntMax);
  if (s.total_steps != 0 && s.total_steps <= s.warmup_steps)
    throw config::ScenarioError(o.where("total_steps"), config::ErrorKind::inconsistent,
                                fmt::format("expected more than warmup_steps ({}), got {}", s.warmup_steps, s.total_steps));
  s.lr_min = o.number("lr_min", s.lr_min, 0.0, config::kInf);
  spec.settings = s;
}

void to_json(const LrScheduleSpec& spec, nlohmann::json& out) {
  out["warmup_steps"] = settings(spec).warmup_steps;
  out["total_steps"] = settings(spec).total_steps;  // 0: the run's steps
  out["lr_min"] = settings(spec).lr_min;
}

LrShape make(const LrScheduleSpec& spec, const LrShapeContext& c) {
  const WarmupCosineSettings& s = settings(spec);
  const double W = static_cast<double>(s.warmup_steps);
  const double T = static_cast<double>(s.total_steps > 0 ? s.total_steps : c.run_steps);
  if (T <= W)  // the loader checks total_steps; the run's steps are the run's
    throw std::invalid_argument(fmt::format("warmup_cosine over the run's {} steps: expected more steps than the "
                                            "warm-up's {}",
                                            c.run_steps, s.warmup_steps));
  return [peak = c.peak, lr_0 = spec.warmup_init_lr, lr_min = s.lr_min, W, T](double t) {
    if (t <= W) return lr_0 + (peak - lr_0) * (t / W);
    const double p = std::min((t - W) / (T - W), 1.0);
    return lr_min + (peak - lr_min) * (1.0 + std::cos(std::numbers::pi * p)) / 2.0;
  };
}

}  // namespace

const LrScheduleEntry& warmup_cosine_schedule() {
  static const LrScheduleEntry entry{
      .name = "warmup_cosine",
      .description = "the language-model default, in steps: linear warm-up from warmup_init_lr to L over warmup_steps, "
                     "then cosine to lr_min at total_steps (or the run's steps)",
      .fields = {"warmup_steps", "total_steps", "lr_min"},
      .example = nlohmann::json::object(),
      .parse = parse,
      .to_json = to_json,
      .counts_epochs = [](const LrScheduleSpec&) { return false; },
      .make = make};
  return entry;
}

}  // namespace dtsim::algorithms
