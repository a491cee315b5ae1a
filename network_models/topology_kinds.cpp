#include "network_models/topology_kinds.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "network_models/topology_section.hpp"

namespace dtsim::net {

using config::ErrorKind;
using config::ObjectReader;
using config::ScenarioError;
using nlohmann::json;

namespace {

// --- shared pieces --------------------------------------------------------------------

void no_fields(ObjectReader&, TopologySpec&, int) {}
void no_json(const TopologySpec&, json&) {}
void no_short_fields(const std::string& rest, const std::string& whole, TopologySpec&) {
  if (!rest.empty()) throw std::invalid_argument(fmt::format("topology \"{}\": expected no \":{}\"", whole, rest));
}

int parse_positive(const std::string& text, const std::string& whole) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1)
    throw std::invalid_argument(fmt::format("topology \"{}\": \"{}\" is not a positive integer", whole, text));
  return v;
}

// --- torus ----------------------------------------------------------------------------

void parse_torus(ObjectReader& t, TopologySpec& spec, int ranks) {
  const json& dims = t.require("dims", "an array of dimension sizes");
  if (!dims.is_array() || dims.empty())
    throw ScenarioError(t.where("dims"), ErrorKind::wrong_type,
                        "expected a non-empty array of integers, got " + config::describe(dims));
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
  spec.dims = out;
}

void torus_json(const TopologySpec& spec, json& out) { out["dims"] = spec.dims; }

void parse_short_torus(const std::string& rest, const std::string& whole, TopologySpec& spec) {
  std::size_t start = 0;
  while (start <= rest.size()) {
    const auto x = rest.find('x', start);
    spec.dims.push_back(parse_positive(rest.substr(start, x - start), whole));
    if (x == std::string::npos) break;
    start = x + 1;
  }
}

Topology build_torus(const TopologySpec& s, int ranks, LinkParams link) {
  // In 64 bits, saturated: the dims come from a user (torus:65536x65536 overflows an int).
  constexpr std::int64_t kBeyond = std::int64_t{1} << 31;
  std::int64_t product = 1;
  for (int d : s.dims) product = std::min(product * d, kBeyond);
  if (s.dims.empty() || product != ranks)
    throw std::invalid_argument(fmt::format("torus dims {} hold {} ranks, not {}", fmt::join(s.dims, "x"),
                                            product >= kBeyond ? "more than 2^31" : std::to_string(product), ranks));
  return Topology::torus(s.dims, link);
}

// --- hypercube ------------------------------------------------------------------------

void parse_hypercube(ObjectReader& t, TopologySpec&, int ranks) {
  if ((ranks & (ranks - 1)) != 0)
    throw ScenarioError(t.where("kind"), ErrorKind::inconsistent,
                        fmt::format("hypercube needs a power-of-two rank count, got {}", ranks));
}

// --- fat_tree -------------------------------------------------------------------------

void parse_fat_tree(ObjectReader& t, TopologySpec& spec, int) { spec.k = static_cast<int>(t.integer("k", std::nullopt, 2, 256)); }
void fat_tree_json(const TopologySpec& spec, json& out) { out["k"] = spec.k; }
void parse_short_fat_tree(const std::string& rest, const std::string& whole, TopologySpec& spec) {
  if (!rest.empty()) spec.k = parse_positive(rest, whole);
}

// --- hierarchical ---------------------------------------------------------------------

void parse_hierarchical(ObjectReader& t, TopologySpec& spec, int) {
  spec.gpus_per_node = static_cast<int>(t.integer("gpus_per_node", std::nullopt, 1, 1 << 20));
  spec.nvswitch = t.boolean("nvswitch", true);
  spec.intra.latency_s = t.number("intra_latency_us", std::nullopt, 0.0, kMaxLatencyUs) * 1e-6;
  spec.intra.bandwidth_bytes_per_s =
      t.number("intra_bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
}

void hierarchical_json(const TopologySpec& spec, json& out) {
  out["gpus_per_node"] = spec.gpus_per_node;
  out["nvswitch"] = spec.nvswitch;
  out["intra_latency_us"] = spec.intra.latency_s * 1e6;
  out["intra_bandwidth_GBps"] = spec.intra.bandwidth_bytes_per_s / 1e9;
}

void parse_short_hierarchical(const std::string& rest, const std::string& whole, TopologySpec& spec) {
  const auto colon = rest.find(':');
  if (!rest.empty()) spec.gpus_per_node = parse_positive(rest.substr(0, colon), whole);
  if (colon != std::string::npos) {
    const auto mode = rest.substr(colon + 1);
    if (mode != "direct" && mode != "nvswitch")
      throw std::invalid_argument(fmt::format("topology \"{}\": expected :direct or :nvswitch", whole));
    spec.nvswitch = mode == "nvswitch";
  }
}

// --- edges ----------------------------------------------------------------------------

void parse_edges(ObjectReader& t, TopologySpec& spec, int ranks) {
  spec.nodes = static_cast<int>(t.integer("nodes", ranks, ranks, 1 << 24));
  const json& edges = t.require("edges", "an array of {a, b, latency_us, bandwidth_GBps}");
  if (!edges.is_array() || edges.empty())
    throw ScenarioError(t.where("edges"), ErrorKind::wrong_type,
                        "expected a non-empty array of edges, got " + config::describe(edges));
  for (std::size_t i = 0; i < edges.size(); ++i) {
    ObjectReader e(edges[i], t.where("edges") + fmt::format("/{}", i));
    Edge edge;
    edge.a = static_cast<int>(e.integer("a", std::nullopt, 0, spec.nodes - 1));
    edge.b = static_cast<int>(e.integer("b", std::nullopt, 0, spec.nodes - 1));
    edge.params.latency_s = e.number("latency_us", std::nullopt, 0.0, kMaxLatencyUs) * 1e-6;
    edge.params.bandwidth_bytes_per_s = e.number("bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
    if (edge.a == edge.b)
      throw ScenarioError(e.where("b"), ErrorKind::inconsistent, fmt::format("expected a node other than a ({})", edge.a));
    e.finish();
    spec.edges.push_back(edge);
  }
}

void edges_json(const TopologySpec& spec, json& out) {
  out["nodes"] = spec.nodes;
  out["edges"] = json::array();
  for (const auto& e : spec.edges)
    out["edges"].push_back({{"a", e.a}, {"b", e.b}, {"latency_us", e.params.latency_s * 1e6},
                            {"bandwidth_GBps", e.params.bandwidth_bytes_per_s / 1e9}});
}

void parse_short_edges(const std::string&, const std::string& whole, TopologySpec&) {
  throw std::invalid_argument(fmt::format("topology \"{}\": an edges topology is a scenario's /topology (a cable list), "
                                          "it has no short form",
                                          whole));
}

// --------------------------------------------------------------------------------------

template <Topology (*Make)(int, LinkParams)>
Topology build_simple(const TopologySpec&, int ranks, LinkParams link) {
  return Make(ranks, link);
}

}  // namespace

std::span<const TopologyKindEntry> topology_kind_table() {
  static const std::vector<TopologyKindEntry> table{
      {"ring", "a cycle of the ranks, one link to each neighbour", {}, "ring", no_fields, no_json, no_short_fields,
       build_simple<Topology::ring>},
      {"complete", "a direct link between every pair of ranks", {}, "complete", no_fields, no_json, no_short_fields,
       build_simple<Topology::complete>},
      {"torus", "a wrap-around grid of the given dimensions (row-major ranks)", {"dims"}, "torus:AxB[xC]", parse_torus,
       torus_json, parse_short_torus, build_torus},
      {"hypercube", "log2(ranks) dimensions of two (power-of-two rank counts)", {}, "hypercube", parse_hypercube, no_json,
       no_short_fields, build_simple<Topology::hypercube>},
      {"exponential", "links to the ranks 2^0, 2^1, ... away (the exponential graph of decentralized SGD papers)", {},
       "exponential", no_fields, no_json, no_short_fields, build_simple<Topology::exponential>},
      {"star", "every rank on one switch", {}, "star", no_fields, no_json, no_short_fields, build_simple<Topology::star>},
      {"fat_tree", "a three-level k-ary fat-tree of switches (up to k^3/4 ranks)", {"k"}, "fat_tree:K", parse_fat_tree,
       fat_tree_json, parse_short_fat_tree,
       [](const TopologySpec& s, int ranks, LinkParams link) { return Topology::fat_tree(ranks, s.k, link); }},
      {"hierarchical", "nodes of gpus_per_node GPUs (on an NVSwitch or fully connected) joined by one network",
       {"gpus_per_node", "nvswitch", "intra_latency_us", "intra_bandwidth_GBps"}, "hierarchical:G[:direct]",
       parse_hierarchical, hierarchical_json, parse_short_hierarchical,
       [](const TopologySpec& s, int ranks, LinkParams link) {
         return Topology::hierarchical(ranks, s.gpus_per_node, s.nvswitch, s.intra, link);
       }},
      {"edges", "an explicit cable list: ranks and switches as nodes, each cable with its own latency and bandwidth",
       {"nodes", "edges"}, "", parse_edges, edges_json, parse_short_edges,
       [](const TopologySpec& s, int ranks, LinkParams) {
         return Topology::from_edges(ranks, s.nodes == 0 ? ranks : s.nodes, s.edges);
       }},
  };
  return table;
}

const TopologyKindEntry* find_topology_kind(std::string_view name) {
  for (const auto& entry : topology_kind_table())
    if (entry.name == name) return &entry;
  return nullptr;
}

const std::vector<std::string>& topology_kinds() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& entry : topology_kind_table()) v.push_back(entry.name);
    return v;
  }();
  return names;
}

}  // namespace dtsim::net
