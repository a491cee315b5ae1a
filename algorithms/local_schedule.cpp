#include "algorithms/local_schedule.hpp"

#include <algorithm>

namespace dtsim::algorithms {

double LocalSchedule::sync_share(std::int64_t steps) const {
  if (steps < 1) return 1.0;
  const double before = static_cast<double>(std::min(steps, std::max<std::int64_t>(turn_on_local_steps_from - 1, 0)));
  const double after = static_cast<double>(steps) - before;
  return (before + after / static_cast<double>(local_steps)) / static_cast<double>(steps);
}

void parse_local_schedule(config::ObjectReader& a, LocalSchedule& s) {
  s.local_steps = a.integer("local_steps", s.local_steps, 1, config::kIntMax);
  s.turn_on_local_steps_from = a.integer("turn_on_local_steps_from", s.turn_on_local_steps_from, 0, config::kIntMax);
}

void local_schedule_json(const LocalSchedule& s, nlohmann::json& out) {
  out["local_steps"] = s.local_steps;
  out["turn_on_local_steps_from"] = s.turn_on_local_steps_from;
}

}  // namespace dtsim::algorithms
