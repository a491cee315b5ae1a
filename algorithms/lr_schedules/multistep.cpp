// lr_schedule "multistep": m(t) = L gamma^(number of milestones M with t / S >= M), the
// reference's MultiStepLR over epochs (its counter advances before it reads the lr, so
// step t = M S already has the decayed lr).
#include "algorithms/lr_schedules/multistep.hpp"

#include <fmt/format.h>

#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

namespace {

using config::ErrorKind;
using config::ScenarioError;
using nlohmann::json;

const MultistepSettings& settings(const LrScheduleSpec& s) { return lr_schedule_settings<MultistepSettings>(s); }

// "milestones": a non-empty array of epochs > 0, strictly ascending.
std::vector<double> parse_milestones(config::ObjectReader& o) {
  const json& items = o.require("milestones", "an array of epochs");
  if (!items.is_array() || items.empty())
    throw ScenarioError(o.where("milestones"), ErrorKind::wrong_type,
                        "expected a non-empty array of epochs, got " + config::describe(items));
  std::vector<double> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string where = o.where("milestones") + fmt::format("/{}", i);
    if (!items[i].is_number())
      throw ScenarioError(where, ErrorKind::wrong_type, "expected an epoch (a number), got " + config::describe(items[i]));
    const double m = items[i].get<double>();
    if (!(m > 0.0 && m < config::kInf))
      throw ScenarioError(where, ErrorKind::out_of_range, fmt::format("expected an epoch > 0, got {}", items[i].dump()));
    if (!out.empty() && m <= out.back())
      throw ScenarioError(where, ErrorKind::inconsistent,
                          fmt::format("expected milestones in ascending order, got {} after {}", items[i].dump(),
                                      json(out.back()).dump()));
    out.push_back(m);
  }
  return out;
}

void parse(config::ObjectReader& o, LrScheduleSpec& spec) {
  MultistepSettings s;
  s.milestones = parse_milestones(o);
  s.gamma = o.number("gamma", s.gamma, 0.0, config::kInf, true);
  spec.settings = s;
}

void to_json(const LrScheduleSpec& spec, json& out) {
  out["milestones"] = settings(spec).milestones;
  out["gamma"] = settings(spec).gamma;
}

LrShape make(const LrScheduleSpec& spec, const LrShapeContext& c) {
  return [s = settings(spec), c](double t) {
    const double epoch = t / c.steps_per_epoch;
    double lr = c.peak;
    for (double m : s.milestones)
      if (epoch >= m) lr *= s.gamma;
    return lr;
  };
}

}  // namespace

const LrScheduleEntry& multistep_schedule() {
  static const LrScheduleEntry entry{
      .name = "multistep",
      .description = "L times gamma per milestone epoch passed (the reference's MultiStepLR)",
      .fields = {"milestones", "gamma"},
      .example = {{"milestones", {1, 2}}},
      .parse = parse,
      .to_json = to_json,
      .counts_epochs = [](const LrScheduleSpec&) { return true; },
      .make = make};
  return entry;
}

}  // namespace dtsim::algorithms
