#include "algorithms/powersgd_options.hpp"

#include <fmt/format.h>

#include "config/scenario_error.hpp"

namespace dtsim::algorithms {

using config::ErrorKind;
using config::ScenarioError;

const std::vector<std::string>& powersgd_fields() {
  static const std::vector<std::string> fields{"matrix_approximation_rank", "start_powerSGD_iter", "min_compression_rate",
                                               "use_error_feedback",        "warm_start",          "orthogonalization_epsilon",
                                               "random_seed"};
  return fields;
}

// PyTorch checks this in PowerSGDState (the buckets it rebuilds after the first iteration
// would not match the error and Q memories); dtsim's buckets never change, but the rule is
// PyTorch's.
std::string powersgd_start_problem(const PowerSgdOptions& o) {
  if ((o.group.error_feedback || o.group.warm_start) && o.start_powerSGD_iter <= 1)
    return fmt::format("expected > 1 with use_error_feedback or warm_start (PyTorch's PowerSGDState: PowerSGD can only "
                       "be applied after the first two iterations of DDP), got {}",
                       o.start_powerSGD_iter);
  return {};
}

void parse_powersgd(config::ObjectReader& a, PowerSgdOptions& o, bool reads_them, const std::string& why_not) {
  if (!reads_them) {
    for (const auto& key : powersgd_fields())  // a look, not a read: the fields are not this variant's
      if (a.value().contains(key)) throw ScenarioError(a.where(key), ErrorKind::unknown_field, why_not);
    return;
  }
  auto& g = o.group;
  g.rank = a.integer("matrix_approximation_rank", g.rank, 1, config::kIntMax);
  g.error_feedback = a.boolean("use_error_feedback", g.error_feedback);
  g.warm_start = a.boolean("warm_start", g.warm_start);
  o.start_powerSGD_iter = a.integer("start_powerSGD_iter", o.start_powerSGD_iter, 0, config::kIntMax);
  if (const auto problem = powersgd_start_problem(o); !problem.empty())
    throw ScenarioError(a.where("start_powerSGD_iter"), ErrorKind::inconsistent, problem);
  g.min_compression_rate = a.number("min_compression_rate", g.min_compression_rate, 0.0, config::kInf);
  g.epsilon = a.number("orthogonalization_epsilon", g.epsilon, 0.0, config::kInf);
  // NumPy seeds take 32 bits.
  o.random_seed = static_cast<std::uint64_t>(
      a.integer("random_seed", static_cast<std::int64_t>(o.random_seed), 0, 4294967295));
}

void powersgd_json(const PowerSgdOptions& o, nlohmann::json& out) {
  out["matrix_approximation_rank"] = o.group.rank;
  out["start_powerSGD_iter"] = o.start_powerSGD_iter;
  out["min_compression_rate"] = o.group.min_compression_rate;
  out["use_error_feedback"] = o.group.error_feedback;
  out["warm_start"] = o.group.warm_start;
  out["orthogonalization_epsilon"] = o.group.epsilon;
  out["random_seed"] = o.random_seed;
}

}  // namespace dtsim::algorithms
