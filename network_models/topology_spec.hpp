// net::TopologySpec: a topology as a scenario or the command line names it, and the
// builder that turns it into a Topology with given default link parameters.
//
// Short form (command line): "ring", "complete", "star", "hypercube", "exponential",
// "torus:8x8" (or 4x4x4), "fat_tree:4" (k), "hierarchical:8" (GPUs per node, NVSwitch),
// "hierarchical:8:direct" (GPUs fully connected, one NIC each).
#pragma once

#include <string>
#include <vector>

#include "network_models/topology.hpp"

namespace dtsim::net {

struct TopologySpec {
  std::string kind = "ring";
  std::vector<int> dims;  // torus
  int k = 4;              // fat_tree
  int gpus_per_node = 8;  // hierarchical
  bool nvswitch = true;   // hierarchical
  LinkParams intra{1e-6, 100e9};  // hierarchical: links inside a node
  int nodes = 0;                  // edges: total nodes (ranks, then switches); 0 = ranks
  std::vector<Edge> edges;        // edges: cables, with their own parameters
};

// Builds `spec` for `ranks` ranks; `link` is the parameter of every link the spec does
// not set itself (for hierarchical: the inter-node links). Throws std::invalid_argument
// naming what does not fit (e.g. a torus whose dims do not multiply to `ranks`).
Topology make_topology(const TopologySpec& spec, int ranks, LinkParams link);

// Parses the short form; throws std::invalid_argument naming the expected forms.
TopologySpec parse_topology(const std::string& text);

}  // namespace dtsim::net
