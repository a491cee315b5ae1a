#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/algorithm.hpp"
#include "algorithms/parallel_sgd.hpp"

namespace dtsim::algorithms {

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names{"parallel_sgd"};
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
    m["parallel_sgd"] = with({"variant"});
    return m;
  }();
  auto it = fields.find(name);
  if (it == fields.end()) throw std::invalid_argument(fmt::format("unknown algorithm \"{}\"", name));
  return it->second;
}

std::unique_ptr<Algorithm> make_algorithm(const AlgorithmSpec& spec, const net::Topology& topology, int rank) {
  if (spec.name == "parallel_sgd") {
    if (spec.variant == "centralized") return std::make_unique<CentralizedSgd>(spec.optimizer);
    if (spec.variant == "decentralized") return std::make_unique<DecentralizedSgd>(spec.optimizer, topology, rank);
    throw std::invalid_argument(
        fmt::format("parallel_sgd: unknown variant \"{}\" (expected centralized or decentralized)", spec.variant));
  }
  throw std::invalid_argument(
      fmt::format("unknown algorithm \"{}\" (expected one of: {})", spec.name, fmt::join(algorithm_names(), ", ")));
}

}  // namespace dtsim::algorithms
