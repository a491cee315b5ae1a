#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/algorithm.hpp"
#include "algorithms/parallel_sgd.hpp"
#include "algorithms/choco_sgd.hpp"
#include "algorithms/dcd_psgd.hpp"
#include "algorithms/distopt.hpp"
#include "algorithms/deepsqueeze.hpp"
#include "algorithms/ecd_psgd.hpp"
#include "algorithms/ef_sign_sgd.hpp"
#include "algorithms/local_ef_sign_sgd.hpp"
#include "algorithms/local_sgd.hpp"
#include "algorithms/local_sign_sgd.hpp"
#include "algorithms/sign_sgd.hpp"
#include "algorithms/sparsified_sgd.hpp"
#include "kernels/cpu/qsgd.hpp"

namespace dtsim::algorithms {

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names{"parallel_sgd",
                                              "choco_sgd", "dcd_psgd", "ecd_psgd", "deepsqueeze",
                                              "sparsified_sgd", "sign_sgd", "ef_sign_sgd",
                                              "local_sgd", "local_sign_sgd", "local_ef_sign_sgd", "distopt"};
  return names;
}

const std::vector<std::string>& algorithm_fields(const std::string& name) {
  static const std::vector<std::string> optimizer{"lr", "momentum", "dampening", "weight_decay", "nesterov"};
  static const std::map<std::string, std::vector<std::string>> fields = [] {
    std::map<std::string, std::vector<std::string>> m;
    auto with = [](std::vector<std::string> extra) {
      std::vector<std::string> all = optimizer;
      all.insert(all.end(), extra.begin(), extra.end());
      return all;
    };
    m["parallel_sgd"] = with({"variant", "compressor"});  // compressor: decentralized only
    m["choco_sgd"] = with({"compressor", "consensus_stepsize", "overlap"});
    m["dcd_psgd"] = with({"compressor"});
    m["ecd_psgd"] = with({"compressor"});
    m["deepsqueeze"] = with({"compressor", "consensus_stepsize"});
    m["sparsified_sgd"] = with({"compressor", "mask_momentum"});
    m["sign_sgd"] = with({"majority_vote"});
    m["ef_sign_sgd"] = with({});
    m["local_sgd"] = with({"local_steps", "turn_on_local_steps_from"});
    m["local_sign_sgd"] = with({"local_steps", "turn_on_local_steps_from"});
    m["local_ef_sign_sgd"] = with({"local_steps", "turn_on_local_steps_from", "packed_signs"});
    m["distopt"] = with({"variant", "threshold", "buffer_size", "clipping", "clip_value", "spars", "top_k", "corr"});
    return m;
  }();
  auto it = fields.find(name);
  if (it == fields.end()) throw std::invalid_argument(fmt::format("unknown algorithm \"{}\"", name));
  return it->second;
}

namespace {

// A compressed model's bytes per byte of fp32 model (Compressor::payload_bytes, without
// the per-tensor terms): values and int32 indices for the sparsifiers, packed bits for
// the signs and QSGD. A threshold payload depends on the data: assumed at most 10 % kept.
double payload_fraction(const kernels::CompressorSpec& c) {
  using kernels::CompressorKind;
  switch (c.kind) {
    case CompressorKind::identity: return 1.0;
    case CompressorKind::fp16:
    case CompressorKind::bf16: return 0.5;
    case CompressorKind::top_k: return 2.0 * c.ratio;
    case CompressorKind::random_k: return (c.shared_seed ? 1.0 : 2.0) * c.ratio;
    case CompressorKind::threshold: return 0.2;
    case CompressorKind::sign:
    case CompressorKind::scaled_sign: return 1.0 / 32.0;
    case CompressorKind::qsgd: return kernels::cpu::qsgd_code_bits(c.levels) / 32.0;
  }
  return 1.0;
}

// Steps that synchronise under the local SGD family's schedule (LocalSchedule), per step.
double local_sync_share(const AlgorithmSpec& spec, std::int64_t steps) {
  if (steps < 1) return 1.0;
  const double before = static_cast<double>(std::min(steps, std::max<std::int64_t>(spec.turn_on_local_steps_from - 1, 0)));
  const double after = static_cast<double>(steps) - before;
  return (before + after / static_cast<double>(spec.local_steps)) / static_cast<double>(steps);
}

}  // namespace

// Counted from each algorithm's members (its .hpp) and what it allocates in step():
MemoryFootprint memory_footprint(const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t steps) {
  MemoryFootprint f;
  const auto& n = spec.name;
  const double p = payload_fraction(spec.compressor);
  if (n == "parallel_sgd" && spec.variant == "centralized") {
    f.model_buffers = 1;  // flat_grads_
  } else if (n == "parallel_sgd") {
    f.model_buffers = 2;  // flat_params_, mixed_
    f.gossips = true;     // identity: the model itself in received_; else GossipMessage's payloads
    f.payload_fraction = spec.compressor.kind == kernels::CompressorKind::identity ? 1.0 : p;
  } else if (n == "choco_sgd") {
    f.model_buffers = 4;  // flat_params_, x_hat_, s_, diff_
    f.gossips = true;
    f.payload_fraction = p;
  } else if (n == "dcd_psgd") {
    f.model_buffers = 4;  // flat_params_, flat_grads_, half_, replicas_[0] (x^_i)
    f.model_buffers_per_peer = 1;  // replicas_ x^_j
    f.gossips = true;
    f.payload_fraction = p;
  } else if (n == "ecd_psgd") {
    f.model_buffers = 5;  // flat_params_, flat_grads_, next_, z_, replicas_[0] (y^_i)
    f.model_buffers_per_peer = 1;  // replicas_ y^_j
    f.gossips = true;
    f.payload_fraction = p;
  } else if (n == "deepsqueeze") {
    f.model_buffers = 2;  // flat_params_, memory_
    f.gossips = true;
    f.payload_fraction = p;
  } else if (n == "sparsified_sgd") {
    f.model_buffers = 3;  // flat_, memory_, update_
    f.gathers = spec.compressor.kind != kernels::CompressorKind::qsgd;  // qsgd all-reduces flat_
    f.payload_fraction = p;
  } else if (n == "sign_sgd" || n == "ef_sign_sgd") {
    f.model_buffers = 3;  // sign: flat_params_, flat_grads_, update_; EF: flat_, memory_, update_
    f.gathers = true;     // packed (scaled) signs
    f.payload_fraction = 1.0 / 32.0;
  } else if (n == "local_sgd" || n == "local_sign_sgd") {
    f.model_buffers = 3;  // consensus_, flat_params_, diff_ (sign: signs_)
    f.collectives_per_step = (n == "local_sgd" ? 1.0 : 2.0) * local_sync_share(spec, steps);  // sign: signs, scales
  } else if (n == "local_ef_sign_sgd") {
    f.model_buffers = 6;  // consensus_, flat_params_, memory_, input_, own_signs_, signs_
    f.gathers = spec.packed_signs;
    f.payload_fraction = 1.0 / 32.0;
    f.collectives_per_step = 2.0 * local_sync_share(spec, steps);  // signs (or their gather), scales
  } else if (n == "distopt") {
    // Partition buffers (fp32; half: fp16), sparse: residuals (corr) and packed pairs.
    const bool sparse = spec.variant == "sparse";
    f.model_buffers = spec.variant == "half" ? 0.5 : 1.0;
    if (sparse) f.model_buffers += spec.corr ? 1.0 : 0.0;
    f.gathers = sparse;
    f.payload_fraction = spec.top_k ? 2.0 * spec.spars : 0.2;
    const auto partitions = static_cast<double>(distopt_partitions(sizes, spec.threshold).size());
    f.collectives_per_step = spec.variant == "partial" ? 1.0 : std::max(1.0, partitions);
  }
  return f;
}

std::unique_ptr<Algorithm> make_algorithm(const AlgorithmSpec& spec, const net::Topology& topology, int rank) {
  if (spec.name == "parallel_sgd") {
    if (spec.variant == "centralized") {
      // The scenario parser accepts "compressor" for parallel_sgd whatever the variant; a
      // centralized run cannot use one (its default, identity, is the plain algorithm).
      if (spec.compressor.kind != kernels::CompressorKind::identity)
        throw std::invalid_argument(
            fmt::format("/algorithm/compressor: parallel_sgd variant centralized takes no compressor (got {}; only "
                        "the decentralized variant does)",
                        kernels::to_string(spec.compressor.kind)));
      return std::make_unique<CentralizedSgd>(spec.optimizer);
    }
    if (spec.variant == "decentralized") return std::make_unique<DecentralizedSgd>(spec, topology, rank);
    throw std::invalid_argument(
        fmt::format("parallel_sgd: unknown variant \"{}\" (expected centralized or decentralized)", spec.variant));
  }
  if (spec.name == "choco_sgd") return std::make_unique<ChocoSgd>(spec, topology, rank);
  if (spec.name == "dcd_psgd") return std::make_unique<DcdPsgd>(spec, topology, rank);
  if (spec.name == "ecd_psgd") return std::make_unique<EcdPsgd>(spec, topology, rank);
  if (spec.name == "deepsqueeze") return std::make_unique<DeepSqueeze>(spec, topology, rank);
  if (spec.name == "sparsified_sgd") return std::make_unique<SparsifiedSgd>(spec, rank);
  if (spec.name == "sign_sgd") return std::make_unique<SignSgd>(spec);
  if (spec.name == "ef_sign_sgd") return std::make_unique<EfSignSgd>(spec);
  if (spec.name == "local_sgd") return std::make_unique<LocalSgd>(spec);
  if (spec.name == "local_sign_sgd") return std::make_unique<LocalSignSgd>(spec);
  if (spec.name == "local_ef_sign_sgd") return std::make_unique<LocalEfSignSgd>(spec);
  if (spec.name == "distopt") return std::make_unique<DistOpt>(spec);
  throw std::invalid_argument(
      fmt::format("unknown algorithm \"{}\" (expected one of: {})", spec.name, fmt::join(algorithm_names(), ", ")));
}

}  // namespace dtsim::algorithms
