// lr_schedule "constant": m(t) = L, the peak lr every step (after any warm-up). No fields
// of its own; without warm-up or scale-up it is the default schedule (lr every step).
#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

const LrScheduleEntry& constant_schedule() {
  static const LrScheduleEntry entry{
      .name = "constant",
      .description = "L, the peak lr, every step (after any warm-up)",
      .fields = {},
      .example = nlohmann::json::object(),
      .parse = [](config::ObjectReader&, LrScheduleSpec&) {},
      .to_json = [](const LrScheduleSpec&, nlohmann::json&) {},
      .counts_epochs = [](const LrScheduleSpec&) { return false; },
      .make = [](const LrScheduleSpec&, const LrShapeContext& c) -> LrShape {
        return [peak = c.peak](double) { return peak; };
      }};
  return entry;
}

}  // namespace dtsim::algorithms
