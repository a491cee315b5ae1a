// The scenario fields several algorithms share, each read and echoed in one place: the
// local optimizer's and the compressor object (the local SGD family's schedule is in
// local_schedule.hpp, PowerSGD's fields in powersgd_options.hpp). An algorithm's entry
// (registry.hpp) lists the ones it reads.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/algorithm_spec.hpp"
#include "algorithms/registry.hpp"
#include "config/object_reader.hpp"

namespace dtsim::algorithms {

// The local optimizer's fields, which every algorithm reads: lr, momentum, dampening,
// weight_decay, nesterov, lr_schedule (lr_schedule.hpp).
const std::vector<std::string>& optimizer_fields();
// optimizer_fields(), then `own`.
std::vector<std::string> with_optimizer_fields(std::vector<std::string> own);

void parse_optimizer(config::ObjectReader& a, OptimizerSpec& o);
void optimizer_json(const OptimizerSpec& o, nlohmann::json& out);

// "compressor": {"kind": K, ...the fields kind K reads (kernels/compressor_kinds.hpp)};
// absent: identity. The seed defaults to the scenario's.
kernels::CompressorSpec parse_compressor(config::ObjectReader& a, const SpecContext& ctx);
nlohmann::json compressor_json(const kernels::CompressorSpec& c);
// parse_compressor for an algorithm that gossips: its neighbours exchange equal-size
// messages, so a kind whose payload size depends on the data (threshold) is refused here,
// at load, with the path, rather than when a rank builds its compressor.
kernels::CompressorSpec parse_gossip_compressor(config::ObjectReader& a, const SpecContext& ctx,
                                                const std::string& algorithm);
// An entry's parse / to_json (registry.hpp) for a gossip algorithm whose only own field is
// "compressor" (DCD-PSGD, ECD-PSGD).
void parse_gossip_compressor_field(config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext& ctx);
void compressor_field_json(const AlgorithmSpec& spec, nlohmann::json& out);
// An entry's parse / to_json for an algorithm whose settings are a LocalSchedule
// (local_schedule.hpp: local SGD, local sign SGD).
void parse_local_schedule_field(config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext& ctx);
void local_schedule_field_json(const AlgorithmSpec& spec, nlohmann::json& out);

}  // namespace dtsim::algorithms
