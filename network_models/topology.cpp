#include "network_models/topology.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::net {

const std::vector<std::string>& Topology::kinds() {
  static const std::vector<std::string> k{"ring", "complete"};
  return k;
}

Topology Topology::make(const std::string& kind, int ranks) {
  if (ranks < 1) throw std::invalid_argument(fmt::format("topology needs at least 1 rank, got {}", ranks));
  if (kind == "ring") return ring(ranks);
  if (kind == "complete") return complete(ranks);
  throw std::invalid_argument(
      fmt::format("unknown topology \"{}\" (expected one of: {})", kind, fmt::join(kinds(), ", ")));
}

Topology Topology::ring(int n) {
  std::vector<std::vector<int>> adj(n);
  for (int r = 0; r < n; ++r) {
    for (int peer : {(r + n - 1) % n, (r + 1) % n})
      if (peer != r && std::find(adj[r].begin(), adj[r].end(), peer) == adj[r].end()) adj[r].push_back(peer);
    std::sort(adj[r].begin(), adj[r].end());
  }
  return Topology("ring", std::move(adj));
}

Topology Topology::complete(int n) {
  std::vector<std::vector<int>> adj(n);
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p)
      if (p != r) adj[r].push_back(p);
  return Topology("complete", std::move(adj));
}

Topology::Topology(std::string kind, std::vector<std::vector<int>> adjacency)
    : kind_(std::move(kind)), adjacency_(std::move(adjacency)) {
  const int n = size();
  // All-pairs hop counts by breadth-first search from every rank.
  hops_.assign(n, std::vector<int>(n, -1));
  for (int s = 0; s < n; ++s) {
    std::deque<int> frontier{s};
    hops_[s][s] = 0;
    while (!frontier.empty()) {
      int u = frontier.front();
      frontier.pop_front();
      for (int v : adjacency_[u])
        if (hops_[s][v] < 0) {
          hops_[s][v] = hops_[s][u] + 1;
          frontier.push_back(v);
        }
    }
  }
  mixing_.assign(n, std::vector<double>(n, 0.0));
  for (int i = 0; i < n; ++i) {
    double off_diagonal = 0.0;
    for (int j : adjacency_[i]) {
      const auto deg_i = adjacency_[i].size(), deg_j = adjacency_[j].size();
      mixing_[i][j] = 1.0 / (1.0 + static_cast<double>(std::max(deg_i, deg_j)));
      off_diagonal += mixing_[i][j];
    }
    mixing_[i][i] = 1.0 - off_diagonal;
  }
}

}  // namespace dtsim::net
