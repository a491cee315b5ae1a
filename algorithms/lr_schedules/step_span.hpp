// What the schedules counted in steps share (warmup_cosine, wsd): a linear warm-up over
// W = warmup_steps from warmup_init_lr to the peak L, and the step T = total_steps they end
// at (0: the run's last step). They take no warmup_epochs; their fields come first in their
// objects, in this order.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"

namespace dtsim::algorithms {

struct LrScheduleSpec;

struct StepSpan {
  std::int64_t warmup_steps = 0;  // W
  std::int64_t total_steps = 0;   // T; 0: the run's steps (echoed as 0)
};

// warmup_steps and total_steps (T > W when set); warmup_epochs refused. ScenarioErrors
// name the field and spec.type.
StepSpan parse_step_span(config::ObjectReader& o, const LrScheduleSpec& spec);
void step_span_json(const StepSpan& span, nlohmann::json& out);
// T for a run of `run_steps`; std::invalid_argument naming `type` when it leaves no step
// after the warm-up.
double step_span_end(const StepSpan& span, std::int64_t run_steps, std::string_view type);

// The warm-up's lr at step t <= W: lr_0 + (L - lr_0) t / W.
inline double step_warmup_lr(double t, double peak, double lr_0, double warmup_steps) {
  return lr_0 + (peak - lr_0) * (t / warmup_steps);
}

}  // namespace dtsim::algorithms
