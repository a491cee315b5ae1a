// The scenario fields several algorithms share, each read and echoed in one place: the
// local optimizer's, the compressor object, the consensus step size and the local SGD
// family's schedule. An algorithm's entry (registry.hpp) lists the ones it reads.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/algorithm.hpp"
#include "algorithms/powersgd.hpp"
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

// "local_steps" (H >= 1) and "turn_on_local_steps_from" (>= 0).
void parse_local_schedule(config::ObjectReader& a, AlgorithmSpec& spec);
void local_schedule_json(const AlgorithmSpec& spec, nlohmann::json& out);

// A compressed message's bytes per byte of fp32 model (for memory_footprint).
double payload_fraction(const kernels::CompressorSpec& c);

// PowerSGD's settings, named as PyTorch's PowerSGDState names them (ddp's powersgd hook,
// parallel_sgd's centralized powersgd): matrix_approximation_rank, start_powerSGD_iter,
// min_compression_rate, use_error_feedback, warm_start, orthogonalization_epsilon,
// random_seed. `reads_them` false: any of them present is an error naming `why_not`.
const std::vector<std::string>& powersgd_fields();
void parse_powersgd(config::ObjectReader& a, AlgorithmSpec& spec, bool reads_them, const std::string& why_not);
void powersgd_json(const AlgorithmSpec& spec, nlohmann::json& out);
// The spec's PowerSGD fields as PowerSgdGroup takes them.
PowerSgdSettings powersgd_settings(const AlgorithmSpec& spec);
// PowerSGDState's own rule: start_powerSGD_iter > 1 with error feedback or warm start;
// "" when it holds, else the problem.
std::string powersgd_start_problem(const AlgorithmSpec& spec);
// Steps that synchronise under the local SGD family's schedule, per step.
double local_sync_share(const AlgorithmSpec& spec, std::int64_t steps);

}  // namespace dtsim::algorithms
