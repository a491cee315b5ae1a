#include "network_models/topology.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::net {

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

// Adds the cable a-b once (a direct topology may name the same pair twice, e.g. a
// torus dimension of size 2 where +1 and -1 are the same neighbour).
void add_edge(std::vector<Edge>& edges, std::set<std::pair<int, int>>& seen, int a, int b, LinkParams p) {
  if (a == b) return;
  if (!seen.insert({std::min(a, b), std::max(a, b)}).second) return;
  edges.push_back({a, b, p});
}

// Where a (src, dst) key starts probing the route table (Fibonacci hashing).
std::size_t route_hash(std::uint64_t key) { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32); }

}  // namespace

Topology::Topology(std::string kind, int ranks, int nodes, const std::vector<Edge>& edges)
    : kind_(std::move(kind)), ranks_(ranks) {
  require(ranks >= 1, fmt::format("{}: needs at least 1 rank, got {}", kind_, ranks));
  require(nodes >= ranks, fmt::format("{}: {} nodes for {} ranks", kind_, nodes, ranks));
  adjacency_.resize(nodes);
  for (const auto& e : edges) {
    require(e.a >= 0 && e.a < nodes && e.b >= 0 && e.b < nodes && e.a != e.b,
            fmt::format("{}: bad edge {}-{} among {} nodes", kind_, e.a, e.b, nodes));
    require(e.params.bandwidth_bytes_per_s > 0 && e.params.latency_s >= 0,
            fmt::format("{}: edge {}-{} needs latency >= 0 and bandwidth > 0", kind_, e.a, e.b));
    for (auto [s, d] : {std::pair{e.a, e.b}, std::pair{e.b, e.a}}) {
      links_.push_back({s, d, e.params});
      adjacency_[s].push_back(static_cast<int>(links_.size()) - 1);
    }
  }
  for (auto& out : adjacency_)
    std::sort(out.begin(), out.end(), [&](int x, int y) { return links_[x].dst < links_[y].dst; });
  failed_.assign(links_.size(), false);
}

// The BFS runs only as far as the destination asked for and resumes from where it
// stopped on the next miss for the same source: a ring or torus schedule needs one or
// two routes per source, and a whole tree per source was a BFS over every node for each
// rank (O(n^2) for n ranks). Parents are set when a node is first reached, in the same
// queue order either way, so a partial tree agrees with the whole one where it is set.
const std::vector<int>& Topology::parents_from(int src, int until) const {
  auto it = parents_.find(src);
  if (it == parents_.end()) {
    // Bounded cache: a BFS tree holds one int per node, so keep at most 256 of them.
    if (parents_.size() >= 256) parents_.erase(parents_.begin());
    BfsTree tree;
    tree.parent.assign(adjacency_.size(), -2);  // -2 unreached, -1 the source
    tree.parent[src] = -1;
    tree.frontier.push_back(src);
    it = parents_.emplace(src, std::move(tree)).first;
  }
  BfsTree& tree = it->second;
  while (tree.head < tree.frontier.size() && (until < 0 || tree.parent[until] == -2)) {
    const int u = tree.frontier[tree.head++];
    for (int l : adjacency_[u]) {
      if (failed_[l]) continue;
      const int v = links_[l].dst;
      if (tree.parent[v] != -2) continue;
      tree.parent[v] = l;
      tree.frontier.push_back(v);
    }
  }
  return tree.parent;
}

const Topology::Route& Topology::route_info(int src, int dst) const {
  if (src < 0 || src >= nodes() || dst < 0 || dst >= nodes())
    throw std::invalid_argument(fmt::format("{}: route {} -> {} outside {} nodes", kind_, src, dst, nodes()));
  const std::uint64_t key =
      (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32 | static_cast<std::uint32_t>(dst)) + 1;
  if (!route_keys_.empty()) {
    const std::size_t mask = route_keys_.size() - 1;
    for (std::size_t i = route_hash(key) & mask;; i = (i + 1) & mask) {
      if (route_keys_[i] == key) return routes_[route_slots_[i]];
      if (route_keys_[i] == 0) break;
    }
  }
  const auto& parent = parents_from(src, dst);
  require(parent[dst] != -2, fmt::format("{}: no route from {} to {}", kind_, src, dst));
  Route r;
  for (int v = dst; v != src; v = links_[parent[v]].src) r.links.push_back(parent[v]);
  std::reverse(r.links.begin(), r.links.end());
  r.bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
  for (int l : r.links) {
    r.latency_s += links_[l].params.latency_s;
    r.bandwidth_bytes_per_s = std::min(r.bandwidth_bytes_per_s, links_[l].params.bandwidth_bytes_per_s);
  }
  // Keep the table at most half full: double it (and re-insert every key) when needed.
  if (2 * (routes_.size() + 1) > route_keys_.size()) {
    const std::size_t capacity = std::max<std::size_t>(64, 2 * route_keys_.size());
    std::vector<std::uint64_t> keys(capacity, 0);
    std::vector<std::uint32_t> slots(capacity, 0);
    for (std::size_t j = 0; j < route_keys_.size(); ++j) {
      if (route_keys_[j] == 0) continue;
      const std::uint64_t k = route_keys_[j];
      std::size_t i = route_hash(k) & (capacity - 1);
      while (keys[i] != 0) i = (i + 1) & (capacity - 1);
      keys[i] = k;
      slots[i] = route_slots_[j];
    }
    route_keys_ = std::move(keys);
    route_slots_ = std::move(slots);
  }
  const std::size_t mask = route_keys_.size() - 1;
  std::size_t i = route_hash(key) & mask;
  while (route_keys_[i] != 0) i = (i + 1) & mask;
  route_keys_[i] = key;
  route_slots_[i] = static_cast<std::uint32_t>(routes_.size());
  routes_.push_back(std::move(r));
  return routes_.back();
}

void Topology::clear_routes() {
  ++routes_version_;
  parents_.clear();
  routes_.clear();
  route_keys_.clear();
  route_slots_.clear();
}

const std::vector<std::vector<int>>& Topology::gossip_graph() const {
  if (!gossip_.empty()) return gossip_;
  // A rank j is a gossip neighbour of r when the shortest path length from r to j equals
  // the shortest length through switches only (never entering another rank).
  auto bfs = [&](int r, bool through_ranks) {
    std::vector<int> dist(adjacency_.size(), -1);
    dist[r] = 0;
    std::deque<int> frontier{r};
    while (!frontier.empty()) {
      const int u = frontier.front();
      frontier.pop_front();
      if (!through_ranks && u != r && u < ranks_) continue;
      for (int l : adjacency_[u]) {
        const int v = links_[l].dst;
        if (failed_[l] || dist[v] >= 0) continue;
        dist[v] = dist[u] + 1;
        frontier.push_back(v);
      }
    }
    return dist;
  };
  gossip_.assign(ranks_, {});
  for (int r = 0; r < ranks_; ++r) {
    const auto shortest = bfs(r, true), direct = bfs(r, false);
    for (int j = 0; j < ranks_; ++j)
      if (j != r && direct[j] >= 0 && direct[j] == shortest[j]) gossip_[r].push_back(j);
  }
  return gossip_;
}

std::vector<double> Topology::mixing_row(int rank, Mixing mixing) const {
  std::vector<double> row(ranks_, 0.0);
  const auto& graph = gossip_graph();
  const auto& nb = graph.at(rank);
  if (mixing == Mixing::Uniform) {
    const double w = 1.0 / (static_cast<double>(nb.size()) + 1.0);
    row[rank] = w;
    for (int j : nb) row[j] = w;
    return row;
  }
  double off = 0.0;
  for (int j : nb) {
    row[j] = 1.0 / (1.0 + static_cast<double>(std::max(nb.size(), graph[j].size())));
    off += row[j];
  }
  row[rank] = 1.0 - off;
  return row;
}

double Topology::spectral_gap(Mixing mixing) const {
  std::vector<std::vector<double>> w;
  for (int r = 0; r < ranks_; ++r) w.push_back(mixing_row(r, mixing));
  if (mixing == Mixing::Uniform)  // symmetrise: the gap is defined for symmetric W
    for (int i = 0; i < ranks_; ++i)
      for (int j = i + 1; j < ranks_; ++j) w[i][j] = w[j][i] = 0.5 * (w[i][j] + w[j][i]);
  return spectral_gap_of(w);
}

void Topology::fail_link(int a, int b) {
  bool found = false;
  for (std::size_t l = 0; l < links_.size(); ++l)
    if ((links_[l].src == a && links_[l].dst == b) || (links_[l].src == b && links_[l].dst == a)) {
      failed_[l] = true;
      found = true;
    }
  require(found, fmt::format("{}: no link {}-{} to fail", kind_, a, b));
  clear_routes();
  for (int r = 0; r < ranks_; ++r) {
    const auto& parent = parents_from(r);
    for (int j = 0; j < ranks_; ++j)
      require(parent[j] != -2, fmt::format("{}: link {}-{} failed and no route is left from rank {} to rank {}",
                                           kind_, a, b, r, j));
  }
  gossip_.clear();
}

// --- builders ---------------------------------------------------------------------------

Topology Topology::ring(int n, LinkParams link) {
  std::vector<Edge> edges;
  std::set<std::pair<int, int>> seen;
  for (int r = 0; r < n; ++r) add_edge(edges, seen, r, (r + 1) % n, link);
  return Topology("ring", n, n, edges);
}

Topology Topology::complete(int n, LinkParams link) {
  std::vector<Edge> edges;
  std::set<std::pair<int, int>> seen;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) add_edge(edges, seen, a, b, link);
  return Topology("complete", n, n, edges);
}

Topology Topology::torus(const std::vector<int>& dims, LinkParams link) {
  require(!dims.empty(), "torus: needs at least one dimension");
  int n = 1;
  for (int d : dims) {
    // The message only on failure: formatting every dim per dim is quadratic (20000 dims of 1: 8 s).
    if (d < 1) require(false, fmt::format("torus: dimension sizes must be >= 1, got {}", fmt::join(dims, "x")));
    n *= d;
  }
  std::vector<Edge> edges;
  std::set<std::pair<int, int>> seen;
  // Row-major: stride of dimension i is the product of the later dimensions.
  std::vector<int> stride(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) stride[i] = stride[i + 1] * dims[i + 1];
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < dims.size(); ++i) {
      const int coord = (r / stride[i]) % dims[i];
      const int next = r + (((coord + 1) % dims[i]) - coord) * stride[i];
      add_edge(edges, seen, r, next, link);
    }
  return Topology(fmt::format("torus:{}", fmt::join(dims, "x")), n, n, edges);
}

Topology Topology::hypercube(int n, LinkParams link) {
  require(n >= 1 && (n & (n - 1)) == 0, fmt::format("hypercube: rank count must be a power of two, got {}", n));
  std::vector<Edge> edges;
  std::set<std::pair<int, int>> seen;
  for (int r = 0; r < n; ++r)
    for (int bit = 1; bit < n; bit <<= 1) add_edge(edges, seen, r, r ^ bit, link);
  return Topology("hypercube", n, n, edges);
}

Topology Topology::exponential(int n, LinkParams link) {
  std::vector<Edge> edges;
  std::set<std::pair<int, int>> seen;
  for (int r = 0; r < n; ++r)
    for (int step = 1; step < n; step <<= 1) add_edge(edges, seen, r, (r + step) % n, link);
  return Topology("exponential", n, n, edges);
}

Topology Topology::star(int n, LinkParams link) {
  std::vector<Edge> edges;
  for (int r = 0; r < n; ++r) edges.push_back({r, n, link});
  return Topology("star", n, n + 1, edges);
}

Topology Topology::fat_tree(int n, int k, LinkParams link) {
  require(k >= 2 && k % 2 == 0, fmt::format("fat_tree: k must be even and >= 2, got {}", k));
  const int half = k / 2, hosts = k * half * half;
  require(n <= hosts, fmt::format("fat_tree: a {}-ary fat-tree holds at most {} ranks, got {}", k, hosts, n));
  // Node ids: ranks, then edge switches (k * half), aggregation (k * half), core (half^2).
  const int edge0 = n, agg0 = edge0 + k * half, core0 = agg0 + k * half, nodes = core0 + half * half;
  std::vector<Edge> edges;
  for (int r = 0; r < n; ++r) edges.push_back({r, edge0 + r / half, link});  // half hosts per edge switch
  for (int pod = 0; pod < k; ++pod)
    for (int e = 0; e < half; ++e)
      for (int a = 0; a < half; ++a) edges.push_back({edge0 + pod * half + e, agg0 + pod * half + a, link});
  for (int pod = 0; pod < k; ++pod)
    for (int a = 0; a < half; ++a)
      for (int c = 0; c < half; ++c) edges.push_back({agg0 + pod * half + a, core0 + a * half + c, link});
  return Topology(fmt::format("fat_tree:k={}", k), n, nodes, edges);
}

Topology Topology::hierarchical(int n, int g, bool nvswitch, LinkParams intra, LinkParams inter) {
  require(g >= 1, fmt::format("hierarchical: gpus_per_node must be >= 1, got {}", g));
  const int node_count = (n + g - 1) / g;
  std::vector<Edge> edges;
  int nodes = n;
  const int top = nvswitch ? n + node_count : n;
  if (nvswitch) {
    for (int r = 0; r < n; ++r) edges.push_back({r, n + r / g, intra});
    for (int m = 0; m < node_count; ++m) edges.push_back({n + m, top, inter});
    nodes = top + 1;
  } else {
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n && b / g == a / g; ++b) edges.push_back({a, b, intra});
    for (int r = 0; r < n; ++r) edges.push_back({r, top, inter});
    nodes = top + 1;
  }
  return Topology(fmt::format("hierarchical:{}x{}{}", node_count, g, nvswitch ? "+nvswitch" : ""), n, nodes, edges);
}

Topology Topology::from_edges(int ranks, int nodes, const std::vector<Edge>& edges, std::string kind) {
  return Topology(std::move(kind), ranks, nodes, edges);
}

// --- spectral gap -------------------------------------------------------------------

std::vector<double> symmetric_eigenvalues(std::vector<std::vector<double>> a) {
  const std::size_t n = a.size();
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0;
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) off += a[p][q] * a[p][q];
    if (off < 1e-30) break;
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) {
        if (std::fabs(a[p][q]) < 1e-300) continue;
        // Rotation that zeroes a[p][q] (Golub & Van Loan, symmetric Schur decomposition).
        const double theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (std::size_t k = 0; k < n; ++k) {
          const double akp = a[k][p], akq = a[k][q];
          a[k][p] = c * akp - s * akq;
          a[k][q] = s * akp + c * akq;
        }
        for (std::size_t k = 0; k < n; ++k) {
          const double apk = a[p][k], aqk = a[q][k];
          a[p][k] = c * apk - s * aqk;
          a[q][k] = s * apk + c * aqk;
        }
      }
  }
  std::vector<double> eig(n);
  for (std::size_t i = 0; i < n; ++i) eig[i] = a[i][i];
  std::sort(eig.begin(), eig.end(), std::greater<>());
  return eig;
}

double spectral_gap_of(const std::vector<std::vector<double>>& w) {
  if (w.size() < 2) return 1.0;
  const auto eig = symmetric_eigenvalues(w);
  return 1.0 - std::max(std::fabs(eig[1]), std::fabs(eig.back()));
}

}  // namespace dtsim::net
