#include "algorithms/lr_schedule.hpp"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::algorithms {

using config::ErrorKind;
using config::kInf;
using config::kIntMax;
using config::ObjectReader;
using config::ScenarioError;
using nlohmann::json;

const LrScheduleEntry& constant_schedule();       // lr_schedules/constant.cpp
const LrScheduleEntry& multistep_schedule();      // lr_schedules/multistep.cpp
const LrScheduleEntry& cosine_schedule();         // lr_schedules/cosine.cpp
const LrScheduleEntry& convex_decay_schedule();   // lr_schedules/convex_decay.cpp
const LrScheduleEntry& warmup_cosine_schedule();  // lr_schedules/warmup_cosine.cpp
const LrScheduleEntry& wsd_schedule();            // lr_schedules/wsd.cpp

std::span<const LrScheduleEntry* const> lr_schedule_entries() {
  static const std::vector<const LrScheduleEntry*> table{&constant_schedule(), &multistep_schedule(), &cosine_schedule(),
                                                         &convex_decay_schedule(), &warmup_cosine_schedule(), &wsd_schedule()};
  return table;
}

std::vector<std::string> lr_schedule_names() {
  std::vector<std::string> names;
  for (const auto* e : lr_schedule_entries()) names.emplace_back(e->name);
  return names;
}

const LrScheduleEntry& lr_schedule_entry(std::string_view name) {
  for (const auto* e : lr_schedule_entries())
    if (e->name == name) return *e;
  throw std::invalid_argument(
      fmt::format("unknown lr_schedule type '{}' (known: {})", name, fmt::join(lr_schedule_names(), ", ")));
}

const std::vector<std::string>& lr_schedule_common_fields() {
  static const std::vector<std::string> fields{"warmup_epochs", "warmup_init_lr", "lr_scaleup"};
  return fields;
}

bool LrScheduleSpec::counts_epochs() const { return warmup_epochs > 0.0 || lr_schedule_entry(type).counts_epochs(*this); }

LrScheduleSpec parse_lr_schedule(ObjectReader& a, double lr) {
  auto o = a.object("lr_schedule", false);
  LrScheduleSpec s;
  s.type = o.choice("type", "constant", lr_schedule_names());
  const auto& entry = lr_schedule_entry(s.type);
  std::vector<std::string> fields = lr_schedule_common_fields();
  fields.insert(fields.end(), entry.fields.begin(), entry.fields.end());
  const std::vector<std::string> except{"type"};
  o.only_fields(fields, except, fmt::format("lr_schedule {}", s.type));

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
  entry.parse(o, s);
  if (!entry.scales && s.scaleup != LrScaleup::none)
    throw ScenarioError(o.where("lr_scaleup"), ErrorKind::inconsistent,
                        fmt::format("{} sets the lr itself (it does not use lr): fold a scale-up into its fields", s.type));
  o.finish();
  return s;
}

json lr_schedule_json(const LrScheduleSpec& s) {
  json up = {{"factor", s.scaleup == LrScaleup::graph ? "graph" : "none"}};
  if (s.scaleup == LrScaleup::graph) up["base_batch_size"] = s.base_batch_size;
  json out = {{"type", s.type}, {"warmup_epochs", s.warmup_epochs}, {"warmup_init_lr", s.warmup_init_lr}, {"lr_scaleup", up}};
  lr_schedule_entry(s.type).to_json(s, out);
  return out;
}

std::int64_t steps_per_epoch(std::int64_t shard_samples, std::int64_t batch_size) {
  if (shard_samples < 1 || batch_size < 1)
    throw std::invalid_argument(fmt::format("steps_per_epoch: expected a shard and a batch of at least one sample, got {} and {}",
                                            shard_samples, batch_size));
  return (shard_samples + batch_size - 1) / batch_size;
}

LrSchedule::LrSchedule(double lr, const LrScheduleSpec& spec, const LrScheduleRank& rank)
    : warmup_epochs_(spec.warmup_epochs), warmup_init_lr_(spec.warmup_init_lr) {
  context_.peak = lr;
  context_.run_steps = rank.run_steps;
  if (spec.counts_epochs()) {
    if (rank.shard_samples < 1)
      throw std::invalid_argument(
          "counts epochs (warmup_epochs, milestones, total_epochs), and this workload has no data to count them in");
    context_.steps_per_epoch = static_cast<double>(algorithms::steps_per_epoch(rank.shard_samples, rank.batch_size));
  }
  if (spec.scaleup == LrScaleup::graph) {
    if (rank.batch_size < 1) throw std::invalid_argument("lr_scaleup graph: this workload has no batch size to scale by");
    // The reference's order: the lr per sample of the base batch, times the batch, times the scale.
    context_.peak = lr / static_cast<double>(spec.base_batch_size) * static_cast<double>(rank.batch_size) *
                    static_cast<double>(rank.neighborhood);
  }
  context_.warmup_steps = spec.warmup_epochs * context_.steps_per_epoch;
  shape_ = lr_schedule_entry(spec.type).make(spec, context_);
}

double LrSchedule::at(std::int64_t t) const {
  const double step = static_cast<double>(t);
  const double W = context_.warmup_steps;
  if (step < W) {
    // The reference's linear segment over epochs [0, E): lr_0 + e (target - lr_0) / E.
    const double epoch = step / context_.steps_per_epoch;
    return warmup_init_lr_ + epoch * ((shape_(W) - warmup_init_lr_) / warmup_epochs_);
  }
  return shape_(step);
}

}  // namespace dtsim::algorithms
