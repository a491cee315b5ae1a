// lr_schedule "convex_decay": m(t) = a / (t - 1 + b), the convex experiments' decay
// (convex_code/base_logistic.py; t - 1 is that code's iteration, from 0). The paper's
// lr = 0.1 / (lambda (t + d)) is a = 0.1 / lambda, b = d. It sets the lr itself: it does
// not read lr and takes no scale-up.
#include "algorithms/lr_schedules/convex_decay.hpp"

#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

namespace {

const ConvexDecaySettings& settings(const LrScheduleSpec& s) { return lr_schedule_settings<ConvexDecaySettings>(s); }

void parse(config::ObjectReader& o, LrScheduleSpec& spec) {
  ConvexDecaySettings s;
  s.a = o.number("a", std::nullopt, 0.0, config::kInf, true);
  s.b = o.number("b", std::nullopt, 0.0, config::kInf, true);
  spec.settings = s;
}

void to_json(const LrScheduleSpec& spec, nlohmann::json& out) {
  out["a"] = settings(spec).a;
  out["b"] = settings(spec).b;
}

}  // namespace

const LrScheduleEntry& convex_decay_schedule() {
  static const LrScheduleEntry entry{
      .name = "convex_decay",
      .description = "a / (t - 1 + b), lr unused: the convex experiments' 0.1 / (lambda (t + d)) is a = 0.1 / lambda, b = d",
      .fields = {"a", "b"},
      .example = {{"a", 1}, {"b", 1}},
      .scales = false,
      .parse = parse,
      .to_json = to_json,
      .counts_epochs = [](const LrScheduleSpec&) { return false; },
      .make = [](const LrScheduleSpec& spec, const LrShapeContext&) -> LrShape {
        return [s = settings(spec)](double t) { return s.a / (t - 1.0 + s.b); };
      }};
  return entry;
}

}  // namespace dtsim::algorithms
