#include "network_models/topology_section.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "network_models/topology.hpp"

namespace dtsim::net {

using config::ErrorKind;
using config::ObjectReader;
using config::ScenarioError;
using nlohmann::json;

namespace {

std::vector<int> parse_torus_dims(ObjectReader& t, int ranks) {
  const json& dims = t.require("dims", "an array of dimension sizes");
  if (!dims.is_array() || dims.empty())
    throw ScenarioError(t.where("dims"), ErrorKind::wrong_type, "expected a non-empty array of integers, got " + config::describe(dims));
  std::vector<int> out;
  std::int64_t product = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    // Each dimension divides ranks, so a larger one (which would overflow the product) is wrong too.
    if (!dims[i].is_number_integer() || (dims[i].is_number_unsigned() && dims[i].get<std::uint64_t>() > 1u << 20) ||
        dims[i].get<std::int64_t>() < 1 || dims[i].get<std::int64_t>() > ranks)
      throw ScenarioError(t.where("dims") + fmt::format("/{}", i), ErrorKind::out_of_range,
                          fmt::format("expected an integer >= 1 and <= ranks ({}), got {}", ranks, config::describe(dims[i])));
    out.push_back(dims[i].get<int>());
    product *= out.back();
    if (product > ranks) break;
  }
  if (product != ranks)
    throw ScenarioError(t.where("dims"), ErrorKind::inconsistent,
                        fmt::format("expected dimensions whose product is ranks ({}), got {}", ranks, fmt::join(out, "x")));
  return out;
}

std::vector<Edge> parse_edges(ObjectReader& t, int nodes) {
  const json& edges = t.require("edges", "an array of {a, b, latency_us, bandwidth_GBps}");
  if (!edges.is_array() || edges.empty())
    throw ScenarioError(t.where("edges"), ErrorKind::wrong_type, "expected a non-empty array of edges, got " + config::describe(edges));
  std::vector<Edge> out;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    ObjectReader e(edges[i], t.where("edges") + fmt::format("/{}", i));
    Edge edge;
    edge.a = static_cast<int>(e.integer("a", std::nullopt, 0, nodes - 1));
    edge.b = static_cast<int>(e.integer("b", std::nullopt, 0, nodes - 1));
    edge.params.latency_s = e.number("latency_us", std::nullopt, 0.0, kMaxLatencyUs) * 1e-6;
    edge.params.bandwidth_bytes_per_s = e.number("bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
    if (edge.a == edge.b)
      throw ScenarioError(e.where("b"), ErrorKind::inconsistent, fmt::format("expected a node other than a ({})", edge.a));
    e.finish();
    out.push_back(edge);
  }
  return out;
}

}  // namespace

TopologySpec parse_topology_section(ObjectReader& t, int ranks) {
  TopologySpec topo;
  topo.kind = t.choice("kind", std::nullopt, topology_kinds());
  if (topo.kind == "torus") topo.dims = parse_torus_dims(t, ranks);
  if (topo.kind == "fat_tree") topo.k = static_cast<int>(t.integer("k", std::nullopt, 2, 256));
  if (topo.kind == "hypercube" && (ranks & (ranks - 1)) != 0)
    throw ScenarioError(t.where("kind"), ErrorKind::inconsistent,
                        fmt::format("hypercube needs a power-of-two rank count, got {}", ranks));
  if (topo.kind == "hierarchical") {
    topo.gpus_per_node = static_cast<int>(t.integer("gpus_per_node", std::nullopt, 1, 1 << 20));
    topo.nvswitch = t.boolean("nvswitch", true);
    topo.intra.latency_s = t.number("intra_latency_us", std::nullopt, 0.0, kMaxLatencyUs) * 1e-6;
    topo.intra.bandwidth_bytes_per_s = t.number("intra_bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
  }
  if (topo.kind == "edges") {
    topo.nodes = static_cast<int>(t.integer("nodes", ranks, ranks, 1 << 24));
    topo.edges = parse_edges(t, topo.nodes);
  }
  t.finish();
  return topo;
}

json topology_section_json(const TopologySpec& topology) {
  json topo = {{"kind", topology.kind}};
  if (topology.kind == "torus") topo["dims"] = topology.dims;
  if (topology.kind == "fat_tree") topo["k"] = topology.k;
  if (topology.kind == "hierarchical") {
    topo["gpus_per_node"] = topology.gpus_per_node;
    topo["nvswitch"] = topology.nvswitch;
    topo["intra_latency_us"] = topology.intra.latency_s * 1e6;
    topo["intra_bandwidth_GBps"] = topology.intra.bandwidth_bytes_per_s / 1e9;
  }
  if (topology.kind == "edges") {
    topo["nodes"] = topology.nodes;
    topo["edges"] = json::array();
    for (const auto& e : topology.edges)
      topo["edges"].push_back({{"a", e.a}, {"b", e.b}, {"latency_us", e.params.latency_s * 1e6},
                               {"bandwidth_GBps", e.params.bandwidth_bytes_per_s / 1e9}});
  }
  return topo;
}

}  // namespace dtsim::net
