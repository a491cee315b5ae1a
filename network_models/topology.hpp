// net::Topology: the physical network (ranks, switches, full-duplex links with latency
// and bandwidth), shortest-path routes, and the gossip graph with its mixing matrices.
//
// Nodes [0, size()) are ranks; nodes [size(), nodes()) are switches. Every cable is two
// directed links, one per direction, with the same latency and bandwidth (full duplex).
//
// Routing: shortest path by hop count. Tie-break (deterministic): breadth-first search
// from the source visiting each node's neighbours in ascending node id; a node's route
// parent is the node that reached it first. In direct topologies (ring, torus, ...)
// ranks forward traffic for others, as GPUs with direct links do.
//
// Gossip graph: ranks i != j are gossip neighbours when a shortest path between them
// has no intermediate rank (on a ring the two adjacent ranks, on a star or fat-tree
// every other rank). Mixing matrices over it (self included):
//   Metropolis-Hastings: w_ij = 1 / (1 + max(deg_i, deg_j)), w_ii = 1 - sum_j w_ij;
//   uniform:             w_ij = 1 / (deg_i + 1) for neighbours and self (symmetric
//                        only on regular graphs, as in the reference code).
// Spectral gap: 1 - max(|lambda_2|, |lambda_n|) of the mixing matrix (eigenvalues in
// decreasing order), computed by the cyclic Jacobi method.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "network_models/link_params.hpp"

namespace dtsim::net {

struct Link {
  int src;
  int dst;
  LinkParams params;
};

struct Edge {  // an undirected cable between two nodes, for custom graphs
  int a;
  int b;
  LinkParams params;
};

enum class Mixing { MetropolisHastings, Uniform };

class Topology {
 public:
  // Direct topologies: ranks only.
  static Topology ring(int ranks, LinkParams link = {});
  static Topology complete(int ranks, LinkParams link = {});
  // A torus with dims[0] * dims[1] * ... ranks, rank = row-major index.
  static Topology torus(const std::vector<int>& dims, LinkParams link = {});
  static Topology hypercube(int ranks, LinkParams link = {});  // ranks a power of two
  // Each rank linked to rank + 2^i (mod n) for 2^i < n (both directions).
  static Topology exponential(int ranks, LinkParams link = {});
  // Switched topologies.
  static Topology star(int ranks, LinkParams link = {});  // every rank on one switch
  // k-ary three-level fat-tree (k even): k pods of k/2 edge and k/2 aggregation
  // switches, (k/2)^2 core switches, up to k^3/4 ranks filled pod by pod.
  static Topology fat_tree(int ranks, int k, LinkParams link = {});
  // Nodes of `gpus_per_node` ranks. With `nvswitch`, each node's GPUs hang off a node
  // switch by `intra` links and the node switch reaches a top switch by one `inter`
  // link; without, a node's GPUs are fully connected by `intra` links and each GPU has
  // its own `inter` link (a NIC) to the top switch.
  static Topology hierarchical(int ranks, int gpus_per_node, bool nvswitch, LinkParams intra, LinkParams inter);
  // Any graph: `nodes` >= ranks, nodes from `ranks` on are switches.
  static Topology from_edges(int ranks, int nodes, const std::vector<Edge>& edges, std::string kind = "edges");

  const std::string& kind() const { return kind_; }
  int size() const { return ranks_; }
  int nodes() const { return static_cast<int>(adjacency_.size()); }
  const std::vector<Link>& links() const { return links_; }
  // Outgoing link ids of a node, in ascending order of their destination.
  const std::vector<int>& out_links(int node) const { return adjacency_.at(node); }

  // A route with the sums a transport needs, computed once per (src, dst) pair.
  struct Route {
    std::vector<int> links;  // link ids from src to dst (empty when src == dst)
    double latency_s = 0.0;  // sum of the links' latencies
    double bandwidth_bytes_per_s = 0.0;  // the smallest link bandwidth (infinity when empty)
  };
  // The route from rank/node `src` to `dst`. Throws std::invalid_argument naming both
  // when no path exists. The reference stays valid until the next fail_link().
  const Route& route_info(int src, int dst) const;
  // Link ids along the route from rank/node `src` to `dst` (empty when src == dst).
  const std::vector<int>& route(int src, int dst) const { return route_info(src, dst).links; }
  // Changes whenever routes are recomputed (fail_link): a Route reference taken under
  // an earlier value may dangle.
  std::uint64_t routes_version() const { return routes_version_; }
  int hops(int src, int dst) const { return static_cast<int>(route(src, dst).size()); }
  double route_latency(int src, int dst) const { return route_info(src, dst).latency_s; }
  double route_bandwidth(int src, int dst) const { return route_info(src, dst).bandwidth_bytes_per_s; }

  // Gossip neighbours of `rank`, ascending, without `rank` itself.
  const std::vector<int>& neighbors(int rank) const { return gossip_graph().at(rank); }
  // Row `rank` of the mixing matrix (length size(), self included).
  std::vector<double> mixing_row(int rank, Mixing mixing = Mixing::MetropolisHastings) const;
  double spectral_gap(Mixing mixing = Mixing::MetropolisHastings) const;

  // Marks a cable (both directions) as failed and recomputes routes: later route()
  // calls avoid it; throws std::invalid_argument naming the link if some pair of ranks
  // becomes disconnected.
  void fail_link(int a, int b);

 private:
  Topology(std::string kind, int ranks, int nodes, const std::vector<Edge>& edges);
  const std::vector<std::vector<int>>& gossip_graph() const;  // computed on first use
  // BFS tree (link ids) from src, grown at least until `until` is reached (-1: whole).
  const std::vector<int>& parents_from(int src, int until = -1) const;

  std::string kind_;
  int ranks_;
  std::vector<Link> links_;
  std::vector<bool> failed_;
  std::vector<std::vector<int>> adjacency_;  // node -> outgoing link ids
  mutable std::vector<std::vector<int>> gossip_;
  // Route caches, filled lazily: BFS parent link per source, and routes per pair. The
  // routes live in a deque (references stay valid as it grows), found through an
  // open-addressing table of (src, dst) keys: a lookup is a multiply and, usually, one
  // probe, instead of a walk down a tree of pairs.
  struct BfsTree {
    std::vector<int> parent;    // per node: the link that reached it, -1 the source, -2 not yet
    std::vector<int> frontier;  // nodes in visiting order; [head, end) not yet expanded
    std::size_t head = 0;
  };
  mutable std::map<int, BfsTree> parents_;
  mutable std::deque<Route> routes_;
  mutable std::vector<std::uint64_t> route_keys_;  // (src << 32 | dst) + 1; 0 = empty slot
  mutable std::vector<std::uint32_t> route_slots_;  // index into routes_ of each key
  std::uint64_t routes_version_ = 0;
  void clear_routes();
};

// The topology kinds known to make_topology, for error messages.
const std::vector<std::string>& topology_kinds();

// Spectral gap of a symmetric matrix given row by row (n x n): 1 - max(|l2|, |ln|).
double spectral_gap_of(const std::vector<std::vector<double>>& symmetric);
// Eigenvalues of a symmetric matrix in decreasing order (cyclic Jacobi).
std::vector<double> symmetric_eigenvalues(std::vector<std::vector<double>> a);

}  // namespace dtsim::net
