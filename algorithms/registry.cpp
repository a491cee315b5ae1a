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
