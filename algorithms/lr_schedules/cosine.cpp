// lr_schedule "cosine": m(t) = lr_min + (L - lr_min) (1 + cos(pi p)) / 2 with
// p = (t - W) / (T - W) clamped to [0, 1]: from the peak after the warm-up (W steps) down to
// lr_min at T = total_epochs S, or at the run's last step.
#include "algorithms/lr_schedules/cosine.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

namespace {

const CosineSettings& settings(const LrScheduleSpec& s) { return lr_schedule_settings<CosineSettings>(s); }

void parse(config::ObjectReader& o, LrScheduleSpec& spec) {
  CosineSettings s;
  s.total_epochs = o.number("total_epochs", s.total_epochs, 0.0, config::kInf, true);
  if (o.find("total_epochs") && s.total_epochs <= spec.warmup_epochs)
    throw config::ScenarioError(o.where("total_epochs"), config::ErrorKind::inconsistent,
                                fmt::format("expected more than warmup_epochs ({}), got {}", spec.warmup_epochs, s.total_epochs));
  s.lr_min = o.number("lr_min", s.lr_min, 0.0, config::kInf);
  spec.settings = s;
}

void to_json(const LrScheduleSpec& spec, nlohmann::json& out) {
  if (settings(spec).total_epochs > 0.0) out["total_epochs"] = settings(spec).total_epochs;  // absent: the run's steps
  out["lr_min"] = settings(spec).lr_min;
}

LrShape make(const LrScheduleSpec& spec, const LrShapeContext& c) {
  const CosineSettings& s = settings(spec);
  const double W = c.warmup_steps;
  const double T = s.total_epochs > 0.0 ? s.total_epochs * c.steps_per_epoch : static_cast<double>(c.run_steps);
  if (T <= W)  // the loader checks total_epochs; the run's steps are the run's
    throw std::invalid_argument(
        fmt::format("cosine over the run's {} steps: expected more steps than the warm-up's {}", c.run_steps, W));
  return [peak = c.peak, lr_min = s.lr_min, W, T](double t) {
    const double p = std::clamp((t - W) / (T - W), 0.0, 1.0);
    return lr_min + (peak - lr_min) * (1.0 + std::cos(std::numbers::pi * p)) / 2.0;
  };
}

}  // namespace

const LrScheduleEntry& cosine_schedule() {
  static const LrScheduleEntry entry{
      .name = "cosine",
      .description = "from L after the warm-up down to lr_min at total_epochs (or the run's end) along (1 + cos(pi p)) / 2",
      .fields = {"total_epochs", "lr_min"},
      .example = {{"total_epochs", 4}},
      .parse = parse,
      .to_json = to_json,
      .counts_epochs = [](const LrScheduleSpec& s) { return settings(s).total_epochs > 0.0; },
      .make = make};
  return entry;
}

}  // namespace dtsim::algorithms
