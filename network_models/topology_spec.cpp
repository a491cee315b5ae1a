#include "network_models/topology_spec.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::net {

Topology make_topology(const TopologySpec& s, int ranks, LinkParams link) {
  if (s.kind == "ring") return Topology::ring(ranks, link);
  if (s.kind == "complete") return Topology::complete(ranks, link);
  if (s.kind == "star") return Topology::star(ranks, link);
  if (s.kind == "hypercube") return Topology::hypercube(ranks, link);
  if (s.kind == "exponential") return Topology::exponential(ranks, link);
  if (s.kind == "fat_tree") return Topology::fat_tree(ranks, s.k, link);
  if (s.kind == "hierarchical") return Topology::hierarchical(ranks, s.gpus_per_node, s.nvswitch, s.intra, link);
  if (s.kind == "torus") {
    // In 64 bits, saturated: the dims come from a user (torus:65536x65536 overflows an int).
    constexpr std::int64_t kBeyond = std::int64_t{1} << 31;
    std::int64_t product = 1;
    for (int d : s.dims) product = std::min(product * d, kBeyond);
    if (s.dims.empty() || product != ranks)
      throw std::invalid_argument(fmt::format("torus dims {} hold {} ranks, not {}", fmt::join(s.dims, "x"),
                                              product >= kBeyond ? "more than 2^31" : std::to_string(product), ranks));
    return Topology::torus(s.dims, link);
  }
  if (s.kind == "edges") return Topology::from_edges(ranks, s.nodes == 0 ? ranks : s.nodes, s.edges);
  throw std::invalid_argument(
      fmt::format("unknown topology \"{}\" (expected one of: {})", s.kind, fmt::join(topology_kinds(), ", ")));
}

namespace {
int parse_positive(const std::string& text, const std::string& whole) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1)
    throw std::invalid_argument(fmt::format("topology \"{}\": \"{}\" is not a positive integer", whole, text));
  return v;
}
}  // namespace

TopologySpec parse_topology(const std::string& text) {
  TopologySpec s;
  const auto colon = text.find(':');
  s.kind = text.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (s.kind == "torus") {
    std::size_t start = 0;
    while (start <= rest.size()) {
      const auto x = rest.find('x', start);
      s.dims.push_back(parse_positive(rest.substr(start, x - start), text));
      if (x == std::string::npos) break;
      start = x + 1;
    }
  } else if (s.kind == "fat_tree") {
    if (!rest.empty()) s.k = parse_positive(rest, text);
  } else if (s.kind == "hierarchical") {
    const auto colon2 = rest.find(':');
    if (!rest.empty()) s.gpus_per_node = parse_positive(rest.substr(0, colon2), text);
    if (colon2 != std::string::npos) {
      const auto mode = rest.substr(colon2 + 1);
      if (mode != "direct" && mode != "nvswitch")
        throw std::invalid_argument(fmt::format("topology \"{}\": expected :direct or :nvswitch", text));
      s.nvswitch = mode == "nvswitch";
    }
  } else if (!rest.empty() || s.kind == "edges" ||
             std::find(topology_kinds().begin(), topology_kinds().end(), s.kind) == topology_kinds().end()) {
    throw std::invalid_argument(fmt::format(
        "topology \"{}\": expected ring, complete, star, hypercube, exponential, torus:AxB[xC], fat_tree:K or "
        "hierarchical:G[:direct]",
        text));
  }
  return s;
}

}  // namespace dtsim::net
