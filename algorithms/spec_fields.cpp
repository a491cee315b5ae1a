#include "algorithms/spec_fields.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "algorithms/local_schedule.hpp"
#include "kernels/compressor_kinds.hpp"

namespace dtsim::algorithms {

using config::ErrorKind;
using config::kInf;
using config::kIntMax;
using config::ObjectReader;
using config::ScenarioError;
using nlohmann::json;

const std::vector<std::string>& optimizer_fields() {
  static const std::vector<std::string> fields{"lr", "momentum", "dampening", "weight_decay", "nesterov", "lr_schedule"};
  return fields;
}

std::vector<std::string> with_optimizer_fields(std::vector<std::string> own) {
  std::vector<std::string> all = optimizer_fields();
  all.insert(all.end(), own.begin(), own.end());
  return all;
}

void parse_optimizer(ObjectReader& a, OptimizerSpec& o) {
  o.lr = a.number("lr", std::nullopt, 0.0, kInf);
  o.momentum = a.number("momentum", o.momentum, 0.0, 1.0);
  o.dampening = a.number("dampening", o.dampening, 0.0, 1.0);
  o.weight_decay = a.number("weight_decay", o.weight_decay, 0.0, kInf);
  o.nesterov = a.boolean("nesterov", o.nesterov);
  if (o.nesterov && (o.momentum == 0.0 || o.dampening != 0.0))
    throw ScenarioError(a.where("nesterov"), ErrorKind::inconsistent, "expected momentum > 0 and dampening 0 with nesterov");
  o.lr_schedule = parse_lr_schedule(a, o.lr);
}

void optimizer_json(const OptimizerSpec& o, json& out) {
  out["lr"] = o.lr;
  out["momentum"] = o.momentum;
  out["dampening"] = o.dampening;
  out["weight_decay"] = o.weight_decay;
  out["nesterov"] = o.nesterov;
  // The default (constant lr) is left out, so that a scenario without a schedule echoes,
  // hashes (sweep point ids) and runs exactly as before schedules existed.
  if (!o.lr_schedule.is_default()) out["lr_schedule"] = lr_schedule_json(o.lr_schedule);
}

kernels::CompressorSpec parse_compressor(ObjectReader& a, const SpecContext& ctx) {
  auto c = a.object("compressor", false);
  const auto& kind = *kernels::find_compressor_kind(c.choice("kind", "identity", kernels::compressor_kind_names()));
  kernels::CompressorSpec cs{.kind = std::string(kind.name), .seed = ctx.seed};
  const std::vector<std::string> except{"kind"};
  c.only_fields(kind.field_names(), except, fmt::format("compressor {}", kind.name));
  if (kind.draws) cs.seed = static_cast<std::uint64_t>(c.integer("seed", static_cast<std::int64_t>(ctx.seed), 0, kIntMax));
  if (kind.parse) kind.parse(c, cs);
  c.finish();
  return cs;
}

json compressor_json(const kernels::CompressorSpec& c) {
  const auto& kind = kernels::compressor_kind_info(c.kind);
  json out = {{"kind", std::string(kind.name)}};
  if (kind.draws) out["seed"] = c.seed;
  if (kind.to_json) kind.to_json(c, out);
  return out;
}

kernels::CompressorSpec parse_gossip_compressor(ObjectReader& a, const SpecContext& ctx, const std::string& algorithm) {
  auto spec = parse_compressor(a, ctx);
  const auto& kind = kernels::compressor_kind_info(spec.kind);
  if (kind.size_depends_on_data)
    throw ScenarioError(a.where("compressor") + "/kind", ErrorKind::inconsistent,
                        fmt::format("{} gossips equal-size messages, and compressor {} sends as many values as the data "
                                    "passes (use top_k or random_k for a fixed share)",
                                    algorithm, kind.name));
  return spec;
}

void parse_gossip_compressor_field(ObjectReader& a, AlgorithmSpec& spec, const SpecContext& ctx) {
  spec.compressor = parse_gossip_compressor(a, ctx, spec.name);
}

void compressor_field_json(const AlgorithmSpec& spec, json& out) { out["compressor"] = compressor_json(spec.compressor); }

void parse_local_schedule_field(ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
  LocalSchedule s;
  parse_local_schedule(a, s);
  spec.settings = s;
}

void local_schedule_field_json(const AlgorithmSpec& spec, json& out) {
  local_schedule_json(settings_of<LocalSchedule>(spec), out);
}

}  // namespace dtsim::algorithms
