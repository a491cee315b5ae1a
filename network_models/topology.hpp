// net::Topology: which ranks are linked, hop distances, and the gossip mixing matrix.
//
// Mixing weights are Metropolis-Hastings: w_ij = 1 / (1 + max(deg_i, deg_j)) for each
// link (i, j), w_ii = 1 - sum_j w_ij. On a ring of n >= 3 this gives 1/3 for self and
// both neighbours, as the reference ChocoSGD code uses; the matrix is symmetric and
// doubly stochastic for every graph.
#pragma once

#include <string>
#include <vector>

namespace dtsim::net {

class Topology {
 public:
  // Known kinds: "ring", "complete". Throws std::invalid_argument naming the kind otherwise.
  static Topology make(const std::string& kind, int ranks);
  static Topology ring(int ranks);
  static Topology complete(int ranks);
  static const std::vector<std::string>& kinds();

  const std::string& kind() const { return kind_; }
  int size() const { return static_cast<int>(adjacency_.size()); }
  // Linked ranks of `rank`, ascending, without `rank` itself.
  const std::vector<int>& neighbors(int rank) const { return adjacency_.at(rank); }
  // Number of links on a shortest path (0 for a == b).
  int hops(int a, int b) const { return hops_.at(a).at(b); }
  // Row `rank` of the Metropolis-Hastings mixing matrix W (self included).
  const std::vector<double>& mixing_row(int rank) const { return mixing_.at(rank); }

 private:
  Topology(std::string kind, std::vector<std::vector<int>> adjacency);
  std::string kind_;
  std::vector<std::vector<int>> adjacency_;
  std::vector<std::vector<int>> hops_;
  std::vector<std::vector<double>> mixing_;
};

}  // namespace dtsim::net
