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

#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

namespace {

const WarmupCosineSettings& settings(const LrScheduleSpec& s) { return lr_schedule_settings<WarmupCosineSettings>(s); }

void parse(config::ObjectReader& o, LrScheduleSpec& spec) {
  WarmupCosineSettings s;
  s.span = parse_step_span(o, spec);
  s.lr_min = o.number("lr_min", s.lr_min, 0.0, config::kInf);
  spec.settings = s;
}

void to_json(const LrScheduleSpec& spec, nlohmann::json& out) {
  step_span_json(settings(spec).span, out);
  out["lr_min"] = settings(spec).lr_min;
}

LrShape make(const LrScheduleSpec& spec, const LrShapeContext& c) {
  const WarmupCosineSettings& s = settings(spec);
  const double W = static_cast<double>(s.span.warmup_steps);
  const double T = step_span_end(s.span, c.run_steps, "warmup_cosine");
  return [peak = c.peak, lr_0 = spec.warmup_init_lr, lr_min = s.lr_min, W, T](double t) {
    if (t <= W) return step_warmup_lr(t, peak, lr_0, W);
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
