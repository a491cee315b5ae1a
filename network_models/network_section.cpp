#include "network_models/network_section.hpp"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "network_models/nccl/nccl_model.hpp"
#include "network_models/network_model.hpp"
#include "network_models/topology_section.hpp"

namespace dtsim::net {

using config::ErrorKind;
using config::kInf;
using config::ObjectReader;
using config::ScenarioError;
using nlohmann::json;

namespace {

const std::vector<std::pair<const char*, CollectiveKind>>& collective_keys() {
  static const std::vector<std::pair<const char*, CollectiveKind>> keys{{"all_reduce", CollectiveKind::AllReduce},
                                                                       {"reduce_scatter", CollectiveKind::ReduceScatter},
                                                                       {"all_gather", CollectiveKind::AllGather},
                                                                       {"broadcast", CollectiveKind::Broadcast}};
  return keys;
}

// "algorithms": {"all_reduce": "ring", ...}: the algorithm each collective kind uses.
void parse_collective_algorithms(ObjectReader& a, NetworkConfig& net) {
  for (const auto& [key, kind] : collective_keys()) {
    std::vector<std::string> allowed{"auto"};
    for (auto alg : algorithms_for(kind)) allowed.push_back(to_string(alg));
    net.algorithms[kind] = parse_algorithm(a.choice(key, to_string(net.algorithms[kind]), allowed));
  }
  a.finish();
}

std::pair<int, int> node_pair(ObjectReader& r, int nodes) {
  return {static_cast<int>(r.integer("a", std::nullopt, 0, 1 << 24)),
          static_cast<int>(r.integer("b", std::nullopt, 0, std::max(nodes, 1 << 24)))};
}

template <class Item, class ParseItem>
std::vector<Item> parse_array(ObjectReader& n, const std::string& key, ParseItem parse_item) {
  std::vector<Item> out;
  const json* items = n.find(key);
  if (!items) return out;
  if (!items->is_array()) throw ScenarioError(n.where(key), ErrorKind::wrong_type, "expected an array, got " + config::describe(*items));
  for (std::size_t i = 0; i < items->size(); ++i) {
    ObjectReader c((*items)[i], n.where(key) + fmt::format("/{}", i));
    out.push_back(parse_item(c));
    c.finish();
  }
  return out;
}

}  // namespace

NetworkConfig parse_network_section(ObjectReader& n, int nodes, std::uint64_t seed) {
  NetworkConfig net;
  net.model = n.choice("model", std::nullopt, network_models());
  if (network_model(net.model).make_clock) {
    // A described machine (the nccl model, the only one): its links are the system's.
    net.nccl = nccl::parse_config(n);
    net.nominal = nccl::nominal_link(net.nccl->system);
    // A look, not a read (ObjectReader::find would mark it read, and a schema recording
    // would list it among the model's fields).
    for (const char* key : {"latency_us", "bandwidth_GBps", "bandwidth_trace", "failures"})
      if (n.value().contains(key))
        throw ScenarioError(n.where(key), ErrorKind::inconsistent,
                            fmt::format("the {} model takes its links from /network/system, not {}", net.model, key));
    if (n.value().contains("algorithms"))
      throw ScenarioError(n.where("algorithms"), ErrorKind::inconsistent,
                          fmt::format("the {} model runs NCCL's own choice of algorithm (nccl_algo restricts it, as "
                                      "NCCL_ALGO does)",
                                      net.model));
  } else {
    for (const std::string& key : nccl::config_fields())
      if (n.value().contains(key))
        throw ScenarioError(n.where(key), ErrorKind::inconsistent,
                            fmt::format("only the nccl model reads {} (this network's model is {})", key, net.model));
    net.nominal.latency_s = n.number("latency_us", std::nullopt, 0.0, kMaxLatencyUs) * 1e-6;
    net.nominal.bandwidth_bytes_per_s = n.number("bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
  }
  net.perturbations.overhead_s = n.number("overhead_us", 0.0, 0.0, kInf) * 1e-6;
  net.perturbations.jitter_s = n.number("jitter_us", 0.0, 0.0, kInf) * 1e-6;
  net.perturbations.jitter_seed = seed;
  net.reuse_collectives = n.boolean("reuse_collectives", true);
  net.evaluate_rings = n.boolean("evaluate_rings", true);
  // A described machine runs NCCL's choice on the system's links: no schedule algorithms
  // to set, no topology links to perturb (refused above).
  if (net.nccl) {
    n.finish();
    return net;
  }
  auto algorithms = n.object("algorithms", false);
  parse_collective_algorithms(algorithms, net);
  net.perturbations.bandwidth_trace = parse_array<BandwidthChange>(n, "bandwidth_trace", [&](ObjectReader& c) {
    BandwidthChange change;
    change.time_s = c.number("time_s", std::nullopt, 0.0, kInf);
    std::tie(change.a, change.b) = node_pair(c, nodes);
    change.bandwidth_bytes_per_s = c.number("bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
    return change;
  });
  net.perturbations.failures = parse_array<LinkFailure>(n, "failures", [&](ObjectReader& c) {
    LinkFailure failure;
    failure.time_s = c.number("time_s", std::nullopt, 0.0, kInf);
    std::tie(failure.a, failure.b) = node_pair(c, nodes);
    return failure;
  });
  n.finish();
  return net;
}

json network_section_json(const NetworkConfig& network) {
  json algorithms = json::object();
  for (const auto& [kind, choice] : network.algorithms) algorithms[to_string(kind)] = to_string(choice);
  json net = {{"model", network.model},
              {"overhead_us", network.perturbations.overhead_s * 1e6},
              {"jitter_us", network.perturbations.jitter_s * 1e6}};
  if (!network.nccl) net["algorithms"] = algorithms;
  if (network.nccl) {
    nccl::add_config_json(*network.nccl, net);
  } else {
    net["latency_us"] = network.nominal.latency_s * 1e6;
    net["bandwidth_GBps"] = network.nominal.bandwidth_bytes_per_s / 1e9;
  }
  if (!network.reuse_collectives) net["reuse_collectives"] = false;  // echoed when off: results keep their ids
  if (!network.evaluate_rings) net["evaluate_rings"] = false;
  if (!network.perturbations.bandwidth_trace.empty()) {
    net["bandwidth_trace"] = json::array();
    for (const auto& c : network.perturbations.bandwidth_trace)
      net["bandwidth_trace"].push_back(
          {{"time_s", c.time_s}, {"a", c.a}, {"b", c.b}, {"bandwidth_GBps", c.bandwidth_bytes_per_s / 1e9}});
  }
  if (!network.perturbations.failures.empty()) {
    net["failures"] = json::array();
    for (const auto& f : network.perturbations.failures) net["failures"].push_back({{"time_s", f.time_s}, {"a", f.a}, {"b", f.b}});
  }
  return net;
}

void check_network_links(const NetworkConfig& network, const Topology& topology) {
  if (network.nccl) {
    nccl::Machine machine;
    try {
      machine = nccl::make_machine(network.nccl->system, topology.size(), network.nccl->env);
    } catch (const std::invalid_argument& e) {
      throw ScenarioError("/network/system", ErrorKind::inconsistent, e.what());
    }
    try {
      (void)nccl::tune(machine, network.nccl->overrides);
    } catch (const std::invalid_argument& e) {
      throw ScenarioError("/network/nccl_algo", ErrorKind::inconsistent, e.what());
    }
    try {
      (void)nccl::Clock(network.nccl, topology.size());
    } catch (const std::invalid_argument& e) {
      throw ScenarioError("/network/nccl_algo", ErrorKind::inconsistent, e.what());
    }
  }
  auto is_link = [&](int a, int b) {
    for (const auto& link : topology.links())
      if (link.src == a && link.dst == b) return true;
    return false;
  };
  auto check = [&](const char* key, std::size_t i, int a, int b) {
    if (!is_link(a, b))
      throw ScenarioError(fmt::format("/network/{}/{}", key, i), ErrorKind::inconsistent,
                          fmt::format("expected a link of the topology, but there is none between nodes {} and {}", a, b));
  };
  const auto& p = network.perturbations;
  for (std::size_t i = 0; i < p.bandwidth_trace.size(); ++i) check("bandwidth_trace", i, p.bandwidth_trace[i].a, p.bandwidth_trace[i].b);
  for (std::size_t i = 0; i < p.failures.size(); ++i) check("failures", i, p.failures[i].a, p.failures[i].b);
}

}  // namespace dtsim::net
