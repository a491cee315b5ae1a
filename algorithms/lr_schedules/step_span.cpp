#include "algorithms/lr_schedules/step_span.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

StepSpan parse_step_span(config::ObjectReader& o, const LrScheduleSpec& spec) {
  if (spec.warmup_epochs != 0.0)
    throw config::ScenarioError(o.where("warmup_epochs"), config::ErrorKind::inconsistent,
                                fmt::format("{} counts its warm-up in steps: set warmup_steps instead", spec.type));
  StepSpan s;
  s.warmup_steps = o.integer("warmup_steps", s.warmup_steps, 0, config::kIntMax);
  s.total_steps = o.integer("total_steps", s.total_steps, 0, config::kIntMax);
  if (s.total_steps != 0 && s.total_steps <= s.warmup_steps)
    throw config::ScenarioError(o.where("total_steps"), config::ErrorKind::inconsistent,
                                fmt::format("expected more than warmup_steps ({}), got {}", s.warmup_steps, s.total_steps));
  return s;
}

void step_span_json(const StepSpan& span, nlohmann::json& out) {
  out["warmup_steps"] = span.warmup_steps;
  out["total_steps"] = span.total_steps;  // 0: the run's steps
}

double step_span_end(const StepSpan& span, std::int64_t run_steps, std::string_view type) {
  const std::int64_t T = span.total_steps > 0 ? span.total_steps : run_steps;
  if (T <= span.warmup_steps)  // the loader checks total_steps; the run's steps are the run's
    throw std::invalid_argument(
        fmt::format("{} over the run's {} steps: expected more steps than the warm-up's {}", type, run_steps, span.warmup_steps));
  return static_cast<double>(T);
}

}  // namespace dtsim::algorithms
