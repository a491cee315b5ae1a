// algorithms::LocalSchedule: when the local SGD family (local SGD, post-local SGD, local
// sign SGD, local EF-sign SGD) synchronises, and the scenario fields that say so.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"

namespace dtsim::algorithms {

struct LocalSchedule {
  std::int64_t local_steps = 1;               // H: sync every H-th step
  std::int64_t turn_on_local_steps_from = 0;  // post-local SGD: every step syncs before this step index

  // True when step t (>= 1) synchronises.
  bool sync_step(std::int64_t t) const { return t < turn_on_local_steps_from || t % local_steps == 0; }
  // The share of `steps` steps that synchronise (1 for steps < 1).
  double sync_share(std::int64_t steps) const;
};

// "local_steps" (H >= 1) and "turn_on_local_steps_from" (>= 0); absent: the struct's defaults.
void parse_local_schedule(config::ObjectReader& a, LocalSchedule& s);
void local_schedule_json(const LocalSchedule& s, nlohmann::json& out);

}  // namespace dtsim::algorithms
