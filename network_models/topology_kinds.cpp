#include "network_models/topology_kinds.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <deque>
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
// The short forms keep the limits the scenario fields have: beyond them the topology's
// node arithmetic overflows an int.
void parse_short_fat_tree(const std::string& rest, const std::string& whole, TopologySpec& spec) {
  if (!rest.empty()) spec.k = parse_positive(rest, whole);
  if (spec.k < 2 || spec.k > 256 || spec.k % 2 != 0)
    throw std::invalid_argument(fmt::format("fat_tree:K: expected an even K in [2, 256], got {}", spec.k));
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
  if (spec.gpus_per_node > (1 << 20))
    throw std::invalid_argument(fmt::format("hierarchical:G: expected G <= {}, got {}", 1 << 20, spec.gpus_per_node));
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


// --- shapes (TopologyShape) -------------------------------------------------------------

double as_double(std::int64_t x) { return static_cast<double>(x); }
double log2_at_least_1(double n) { return n > 2.0 ? std::log2(n) : 1.0; }

TopologyShape base_shape(const TopologySpec& t, int ranks) {
  TopologyShape s;
  s.ranks = s.nodes = std::max(1, ranks);
  s.label = t.kind;
  return s;
}

TopologyShape ring_shape(const TopologySpec& t, int ranks) {
  auto s = base_shape(t, ranks);
  const double n = s.ranks;
  s.cables = n >= 3 ? n : n - 1;
  s.degree = std::min(2.0, n - 1);
  s.hops = std::max(1.0, n / 4);
  s.dedup = true;
  return s;
}

TopologyShape complete_shape(const TopologySpec& t, int ranks) {
  auto s = base_shape(t, ranks);
  const double n = s.ranks;
  s.cables = n * (n - 1) / 2;
  s.degree = n - 1;
  s.dedup = true;
  return s;
}

TopologyShape torus_shape(const TopologySpec& t, int ranks) {
  auto s = base_shape(t, ranks);
  const double n = s.ranks;
  s.cables = s.degree = 0;
  s.hops = 0;
  for (int dim : t.dims) {
    s.cables += dim >= 3 ? n : dim == 2 ? n / 2 : 0;
    s.degree += dim >= 3 ? 2 : dim == 2 ? 1 : 0;
    s.hops += dim / 4.0;
  }
  s.hops = std::max(1.0, s.hops);
  if (t.dims.size() >= 2) s.coupled_ring_share = std::min(1.0, 2.0 / (as_double(t.dims[0]) * as_double(t.dims[1])));
  s.label = fmt::format("torus {}", fmt::join(t.dims, "x"));
  s.dedup = true;
  return s;
}

TopologyShape hypercube_shape(const TopologySpec& t, int ranks) {
  auto s = base_shape(t, ranks);
  const double n = s.ranks;
  const double bits = n > 1 ? std::log2(n) : 0;
  s.cables = n * bits / 2;
  s.degree = bits;
  s.hops = std::max(1.0, bits / 2);
  s.neighbour_hops = 2;  // r -> r + 1 flips about two bits
  s.coupled_ring_share = 0.375;
  s.dedup = true;
  return s;
}

TopologyShape exponential_shape(const TopologySpec& t, int ranks) {
  auto s = base_shape(t, ranks);
  const double n = s.ranks;
  double steps = 0;
  for (double step = 1; step < n; step *= 2) ++steps;
  s.cables = n * steps;
  s.degree = std::min(n - 1, 2 * steps);
  s.hops = std::max(1.0, log2_at_least_1(n) / 2);
  s.dedup = true;
  return s;
}

TopologyShape star_shape(const TopologySpec& t, int ranks) {
  auto s = base_shape(t, ranks);
  const double n = s.ranks;
  s.nodes = n + 1;
  s.cables = n;
  s.degree = n - 1;
  s.hops = s.neighbour_hops = 2;
  return s;
}

TopologyShape fat_tree_shape(const TopologySpec& t, int ranks) {
  auto s = base_shape(t, ranks);
  const double n = s.ranks;
  const double k = t.k, half = k / 2;
  s.nodes = n + 2 * k * half + half * half;
  s.cables = n + 2 * k * half * half;
  s.degree = n - 1;
  s.hops = s.neighbour_hops = 6;
  s.label = fmt::format("fat_tree k={}", t.k);
  return s;
}

TopologyShape hierarchical_shape(const TopologySpec& t, int ranks) {
  auto s = base_shape(t, ranks);
  const double n = s.ranks;
  const double g = std::max(1, t.gpus_per_node), nodes = std::ceil(n / g);
  s.degree = n - 1;
  if (t.nvswitch) {
    s.nodes = n + nodes + 1;
    s.cables = n + nodes;
    s.hops = s.neighbour_hops = 4;
  } else {
    s.nodes = n + 1;
    s.cables = n * (std::min(g, n) - 1) / 2 + n;
    s.hops = s.neighbour_hops = 2;
  }
  return s;
}

// Mean BFS distance from rank 0 to the other ranks, and the largest rank degree when no
// switch is present: a custom graph is given edge by edge, so this is cheap next to it.
TopologyShape edges_shape(const TopologySpec& t, int ranks) {
  auto shape = base_shape(t, ranks);
  shape.nodes = std::max<double>(shape.ranks, t.nodes);
  shape.cables = as_double(static_cast<std::int64_t>(t.edges.size()));
  shape.coupled_ring_share = 1.0;
  const auto n = static_cast<std::size_t>(std::max<double>(shape.nodes, 1));
  std::vector<std::vector<int>> adj(n);
  for (const auto& e : t.edges)
    if (e.a >= 0 && e.b >= 0 && static_cast<std::size_t>(e.a) < n && static_cast<std::size_t>(e.b) < n) {
      adj[static_cast<std::size_t>(e.a)].push_back(e.b);
      adj[static_cast<std::size_t>(e.b)].push_back(e.a);
    }
  const auto rank_count = static_cast<std::size_t>(shape.ranks);
  double largest = 0;
  for (std::size_t r = 0; r < rank_count && r < n; ++r)
    largest = std::max(largest, as_double(static_cast<std::int64_t>(adj[r].size())));
  const bool switches = n > rank_count;
  shape.degree = switches ? shape.ranks - 1 : largest;
  std::vector<int> dist(n, -1);
  std::deque<int> frontier{0};
  dist[0] = 0;
  double sum = 0, reached = 0;
  while (!frontier.empty()) {
    const int u = frontier.front();
    frontier.pop_front();
    if (static_cast<std::size_t>(u) < rank_count && u != 0) sum += dist[static_cast<std::size_t>(u)], ++reached;
    for (int v : adj[static_cast<std::size_t>(u)])
      if (dist[static_cast<std::size_t>(v)] < 0) {
        dist[static_cast<std::size_t>(v)] = dist[static_cast<std::size_t>(u)] + 1;
        frontier.push_back(v);
      }
  }
  shape.hops = reached > 0 ? std::max(1.0, sum / reached) : 1.0;
  shape.neighbour_hops = switches ? 2.0 : 1.0;
  return shape;
}

}  // namespace

std::span<const TopologyKindEntry> topology_kind_table() {
  static const std::vector<TopologyKindEntry> table{
      {"ring", "a cycle of the ranks, one link to each neighbour", {}, "ring", no_fields, no_json, no_short_fields,
       build_simple<Topology::ring>, ring_shape},
      {"complete", "a direct link between every pair of ranks", {}, "complete", no_fields, no_json, no_short_fields,
       build_simple<Topology::complete>, complete_shape},
      {"torus", "a wrap-around grid of the given dimensions (row-major ranks)", {"dims"}, "torus:AxB[xC]", parse_torus,
       torus_json, parse_short_torus, build_torus, torus_shape},
      {"hypercube", "log2(ranks) dimensions of two (power-of-two rank counts)", {}, "hypercube", parse_hypercube, no_json,
       no_short_fields, build_simple<Topology::hypercube>, hypercube_shape},
      {"exponential", "links to the ranks 2^0, 2^1, ... away (the exponential graph of decentralized SGD papers)", {},
       "exponential", no_fields, no_json, no_short_fields, build_simple<Topology::exponential>, exponential_shape},
      {"star", "every rank on one switch", {}, "star", no_fields, no_json, no_short_fields, build_simple<Topology::star>,
       star_shape},
      {"fat_tree", "a three-level k-ary fat-tree of switches (up to k^3/4 ranks)", {"k"}, "fat_tree:K", parse_fat_tree,
       fat_tree_json, parse_short_fat_tree,
       [](const TopologySpec& s, int ranks, LinkParams link) { return Topology::fat_tree(ranks, s.k, link); },
       fat_tree_shape},
      {"hierarchical", "nodes of gpus_per_node GPUs (on an NVSwitch or fully connected) joined by one network",
       {"gpus_per_node", "nvswitch", "intra_latency_us", "intra_bandwidth_GBps"}, "hierarchical:G[:direct]",
       parse_hierarchical, hierarchical_json, parse_short_hierarchical,
       [](const TopologySpec& s, int ranks, LinkParams link) {
         return Topology::hierarchical(ranks, s.gpus_per_node, s.nvswitch, s.intra, link);
       },
       hierarchical_shape},
      {"edges", "an explicit cable list: ranks and switches as nodes, each cable with its own latency and bandwidth",
       {"nodes", "edges"}, "", parse_edges, edges_json, parse_short_edges,
       [](const TopologySpec& s, int ranks, LinkParams) {
         return Topology::from_edges(ranks, s.nodes == 0 ? ranks : s.nodes, s.edges);
       },
       edges_shape},
  };
  return table;
}

const TopologyKindEntry* find_topology_kind(std::string_view name) {
  for (const auto& entry : topology_kind_table())
    if (entry.name == name) return &entry;
  return nullptr;
}

TopologyShape topology_shape(const TopologySpec& spec, int ranks) {
  const auto* entry = find_topology_kind(spec.kind);
  if (!entry) throw std::invalid_argument(fmt::format("topology_shape: unknown topology kind \"{}\"", spec.kind));
  return entry->shape(spec, ranks);
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
