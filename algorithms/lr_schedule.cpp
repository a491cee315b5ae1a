#include "algorithms/lr_schedule.hpp"

#include "algorithms/lr_warmup_cosine.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::algorithms {

using config::ErrorKind;
using config::kInf;
using config::kIntMax;
using config::ObjectReader;
using config::ScenarioError;
using nlohmann::json;

bool LrScheduleSpec::counts_epochs() const {
  return warmup_epochs > 0.0 || type == LrScheduleType::multistep ||
         (type == LrScheduleType::cosine && total_epochs > 0.0);
}

const std::vector<LrScheduleTypeInfo>& lr_schedule_types() {
  static const std::vector<LrScheduleTypeInfo> types{
      {LrScheduleType::constant, "constant", {}, "the peak lr every step (after any warm-up)"},
      {LrScheduleType::multistep, "multistep", {"milestones", "gamma"},
       "the peak lr times gamma per milestone epoch passed (the reference's MultiStepLR)"},
      {LrScheduleType::cosine, "cosine", {"total_epochs", "lr_min"},
       "cosine from the peak lr to lr_min over total_epochs (or the run), after the warm-up"},
      {LrScheduleType::convex_decay, "convex_decay", {"a", "b"}, "a / (t - 1 + b): the convex experiments' decay"},
      {LrScheduleType::warmup_cosine, "warmup_cosine", {"warmup_steps", "total_steps", "lr_min"},
       "linear warm-up over warmup_steps, then cosine to lr_min at total_steps (or the run's steps): the "
       "language-model default"}};
  return types;
}

const std::vector<std::string>& lr_schedule_common_fields() {
  static const std::vector<std::string> fields{"warmup_epochs", "warmup_init_lr", "lr_scaleup"};
  return fields;
}

std::string_view to_string(LrScheduleType type) {
  for (const auto& info : lr_schedule_types())
    if (info.type == type) return info.name;
  return "?";
}

namespace {

const LrScheduleTypeInfo& type_info(LrScheduleType type) {
  for (const auto& info : lr_schedule_types())
    if (info.type == type) return info;
  throw std::logic_error("lr_schedule: a type missing from lr_schedule_types()");
}

std::vector<std::string> type_names() {
  std::vector<std::string> names;
  for (const auto& info : lr_schedule_types()) names.emplace_back(info.name);
  return names;
}

// "milestones": a non-empty array of epochs > 0, strictly ascending.
std::vector<double> parse_milestones(ObjectReader& o) {
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
    if (!(m > 0.0 && m < kInf))
      throw ScenarioError(where, ErrorKind::out_of_range, fmt::format("expected an epoch > 0, got {}", items[i].dump()));
    if (!out.empty() && m <= out.back())
      throw ScenarioError(where, ErrorKind::inconsistent,
                          fmt::format("expected milestones in ascending order, got {} after {}", items[i].dump(),
                                      json(out.back()).dump()));
    out.push_back(m);
  }
  return out;
}

}  // namespace

LrScheduleSpec parse_lr_schedule(ObjectReader& a, double lr) {
  auto o = a.object("lr_schedule", false);
  LrScheduleSpec s;
  const std::string name = o.choice("type", "constant", type_names());
  for (const auto& info : lr_schedule_types())
    if (info.name == name) s.type = info.type;
  const auto& info = type_info(s.type);
  std::vector<std::string> fields = lr_schedule_common_fields();
  fields.insert(fields.end(), info.fields.begin(), info.fields.end());
  const std::vector<std::string> except{"type"};
  o.only_fields(fields, except, fmt::format("lr_schedule {}", name));

  {
    auto up = o.object("lr_scaleup", false);
    const bool graph = up.choice("factor", "none", {"none", "graph"}) == "graph";
    const std::vector<std::string> graph_fields{"base_batch_size"}, none_fields{}, factor{"factor"};
    up.only_fields(graph ? graph_fields : none_fields, factor, graph ? "lr_scaleup graph" : "lr_scaleup none");
    if (graph) {
      s.scaleup = LrScaleup::graph;
      s.base_batch_size = up.integer("base_batch_size", std::nullopt, 1, kIntMax);
    }
    up.finish();
  }
  s.warmup_epochs = o.number("warmup_epochs", 0.0, 0.0, kInf);
  // The reference warms up from the unscaled lr to the scaled one; with nothing to scale,
  // a warm-up from lr to lr would be flat, so it starts from 0 instead.
  s.warmup_init_lr = o.number("warmup_init_lr", s.scaleup == LrScaleup::graph ? lr : 0.0, 0.0, kInf);
  switch (s.type) {
    case LrScheduleType::constant:
      break;
    case LrScheduleType::multistep:
      s.milestones = parse_milestones(o);
      s.gamma = o.number("gamma", 0.1, 0.0, kInf, true);
      break;
    case LrScheduleType::cosine:
      s.total_epochs = o.number("total_epochs", 0.0, 0.0, kInf, true);
      if (o.find("total_epochs") && s.total_epochs <= s.warmup_epochs)
        throw ScenarioError(o.where("total_epochs"), ErrorKind::inconsistent,
                            fmt::format("expected more than warmup_epochs ({}), got {}", s.warmup_epochs, s.total_epochs));
      s.lr_min = o.number("lr_min", 0.0, 0.0, kInf);
      break;
    case LrScheduleType::convex_decay:
      s.a = o.number("a", std::nullopt, 0.0, kInf, true);
      s.b = o.number("b", std::nullopt, 0.0, kInf, true);
      if (s.scaleup != LrScaleup::none)
        throw ScenarioError(o.where("lr_scaleup"), ErrorKind::inconsistent,
                            "convex_decay sets lr = a / (t + b) itself (it does not use lr): fold a scale-up into a");
      break;
    case LrScheduleType::warmup_cosine:
      if (s.warmup_epochs != 0.0)
        throw ScenarioError(o.where("warmup_epochs"), ErrorKind::inconsistent,
                            "warmup_cosine counts its warm-up in steps: set warmup_steps instead");
      s.warmup_steps = o.integer("warmup_steps", 0, 0, kIntMax);
      s.total_steps = o.integer("total_steps", 0, 0, kIntMax);
      if (s.total_steps != 0 && s.total_steps <= s.warmup_steps)
        throw ScenarioError(o.where("total_steps"), ErrorKind::inconsistent,
                            fmt::format("expected more than warmup_steps ({}), got {}", s.warmup_steps, s.total_steps));
      s.lr_min = o.number("lr_min", 0.0, 0.0, kInf);
      break;
  }
  o.finish();
  return s;
}

json lr_schedule_json(const LrScheduleSpec& s) {
  json up = {{"factor", s.scaleup == LrScaleup::graph ? "graph" : "none"}};
  if (s.scaleup == LrScaleup::graph) up["base_batch_size"] = s.base_batch_size;
  json out = {{"type", std::string(to_string(s.type))},
              {"warmup_epochs", s.warmup_epochs},
              {"warmup_init_lr", s.warmup_init_lr},
              {"lr_scaleup", up}};
  switch (s.type) {
    case LrScheduleType::constant:
      break;
    case LrScheduleType::multistep:
      out["milestones"] = s.milestones;
      out["gamma"] = s.gamma;
      break;
    case LrScheduleType::cosine:
      if (s.total_epochs > 0.0) out["total_epochs"] = s.total_epochs;  // absent: the run's steps
      out["lr_min"] = s.lr_min;
      break;
    case LrScheduleType::convex_decay:
      out["a"] = s.a;
      out["b"] = s.b;
      break;
    case LrScheduleType::warmup_cosine:
      out["warmup_steps"] = s.warmup_steps;
      out["total_steps"] = s.total_steps;  // 0: the run's steps
      out["lr_min"] = s.lr_min;
      break;
  }
  return out;
}

std::int64_t steps_per_epoch(std::int64_t shard_samples, std::int64_t batch_size) {
  if (shard_samples < 1 || batch_size < 1)
    throw std::invalid_argument(fmt::format("steps_per_epoch: expected a shard and a batch of at least one sample, got {} and {}",
                                            shard_samples, batch_size));
  return (shard_samples + batch_size - 1) / batch_size;
}

LrSchedule::LrSchedule(double lr, const LrScheduleSpec& spec, const LrScheduleRank& rank) : spec_(spec), peak_(lr) {
  if (spec.counts_epochs()) {
    if (rank.shard_samples < 1)
      throw std::invalid_argument(
          "counts epochs (warmup_epochs, milestones, total_epochs), and this workload has no data to count them in");
    steps_per_epoch_ = static_cast<double>(algorithms::steps_per_epoch(rank.shard_samples, rank.batch_size));
  }
  if (spec.scaleup == LrScaleup::graph) {
    if (rank.batch_size < 1) throw std::invalid_argument("lr_scaleup graph: this workload has no batch size to scale by");
    // The reference's order: the lr per sample of the base batch, times the batch, times the scale.
    peak_ = lr / static_cast<double>(spec.base_batch_size) * static_cast<double>(rank.batch_size) *
            static_cast<double>(rank.neighborhood);
  }
  warmup_steps_ = spec.warmup_epochs * steps_per_epoch_;
  total_steps_ = spec.total_epochs > 0.0 ? spec.total_epochs * steps_per_epoch_ : static_cast<double>(rank.run_steps);
  if (spec.type == LrScheduleType::warmup_cosine) {
    total_steps_ = static_cast<double>(spec.total_steps > 0 ? spec.total_steps : rank.run_steps);
    if (total_steps_ <= static_cast<double>(spec.warmup_steps))  // the loader checks total_steps
      throw std::invalid_argument(fmt::format("warmup_cosine over the run's {} steps: expected more steps than the "
                                              "warm-up's {}",
                                              rank.run_steps, spec.warmup_steps));
  }
  if (spec.type == LrScheduleType::cosine && total_steps_ <= warmup_steps_)  // the loader checks total_epochs
    throw std::invalid_argument(fmt::format("cosine over the run's {} steps: expected more steps than the warm-up's {}",
                                            rank.run_steps, warmup_steps_));
}

double LrSchedule::main_schedule(double t) const {
  switch (spec_.type) {
    case LrScheduleType::constant:
      return peak_;
    case LrScheduleType::multistep: {
      const double epoch = t / steps_per_epoch_;
      double lr = peak_;
      for (double m : spec_.milestones)
        if (epoch >= m) lr *= spec_.gamma;
      return lr;
    }
    case LrScheduleType::cosine: {
      const double span = total_steps_ - warmup_steps_;
      const double p = span > 0.0 ? std::clamp((t - warmup_steps_) / span, 0.0, 1.0) : 1.0;
      return spec_.lr_min + (peak_ - spec_.lr_min) * (1.0 + std::cos(std::numbers::pi * p)) / 2.0;
    }
    case LrScheduleType::convex_decay:
      return spec_.a / (t - 1.0 + spec_.b);
    case LrScheduleType::warmup_cosine:
      return warmup_cosine_lr(t, peak_, spec_.warmup_init_lr, spec_.lr_min, static_cast<double>(spec_.warmup_steps),
                              total_steps_);
  }
  throw std::logic_error("lr_schedule: unknown type");
}

double LrSchedule::at(std::int64_t t) const {
  const double step = static_cast<double>(t);
  if (step < warmup_steps_) {
    // The reference's linear segment over epochs [0, E): lr_0 + e (target - lr_0) / E.
    const double epoch = step / steps_per_epoch_;
    return spec_.warmup_init_lr + epoch * ((main_schedule(warmup_steps_) - spec_.warmup_init_lr) / spec_.warmup_epochs);
  }
  return main_schedule(step);
}

}  // namespace dtsim::algorithms
