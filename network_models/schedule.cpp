#include "network_models/schedule.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "config/closest_name.hpp"

namespace dtsim::net {

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

std::int64_t chunk_elements(std::int64_t elements, int parts, int i) {
  return elements / parts + (i < elements % parts ? 1 : 0);
}

Schedule empty_schedule(std::string name, int n, int lanes = 1) {
  Schedule s;
  s.name = std::move(name);
  s.lanes.assign(n, std::vector<Lane>(lanes));
  return s;
}

Schedule ring_schedule(int n, int steps, int shift_from, std::vector<double> chunk) {
  Schedule s;
  s.name = "ring";
  s.ring = {n, n == 1 ? 0 : steps, shift_from, std::move(chunk)};
  return s;
}

std::vector<double> chunks(const CollectiveSpec& c, int parts) {
  std::vector<double> out(parts);
  for (int i = 0; i < parts; ++i) out[i] = chunk_bytes(c.elements, c.element_size, parts, i);
  return out;
}

// Reduce-scatter: send chunk r - k; then all-gather: rank r owns reduced chunk r + 1 and
// forwards r + 1 - k.
Schedule ring_all_reduce(const CollectiveSpec& c) {
  return ring_schedule(c.ranks, 2 * (c.ranks - 1), c.ranks - 1, chunks(c, c.ranks));
}

Schedule ring_reduce_scatter(const CollectiveSpec& c) {
  return ring_schedule(c.ranks, c.ranks - 1, c.ranks, chunks(c, c.ranks));
}

std::vector<double> block_bytes(const CollectiveSpec& c) {
  if (static_cast<int>(c.block_elements.size()) != c.ranks)
    throw std::invalid_argument(fmt::format("all_gather: {} block sizes for {} ranks", c.block_elements.size(), c.ranks));
  std::vector<double> b;
  for (auto e : c.block_elements) b.push_back(static_cast<double>(e * c.element_size));
  return b;
}

Schedule ring_all_gather(const CollectiveSpec& c) {
  return ring_schedule(c.ranks, c.ranks - 1, c.ranks, block_bytes(c));
}

// A ring's messages: `passes` times n - 1 steps, one message per rank each, to r + 1.
ScheduleCounts ring_counts(double n, double passes) {
  return {.messages = passes * n * (n - 1), .pairs = n, .in_flight = n, .schedule_transfers = 0, .neighbour_pairs = true};
}
ScheduleCounts ring_all_reduce_counts(int n) { return ring_counts(n, 2); }
ScheduleCounts ring_one_pass_counts(int n) { return ring_counts(n, 1); }

// Direct: one step in which every rank sends to every other rank at once (multi-port);
// rank r sends bytes_of(r, p) to p and receives from every p.
template <typename BytesOf>
void all_to_all_step(Schedule& s, BytesOf bytes_of) {
  const int n = s.size();
  if (n == 1) return;
  for (int r = 0; r < n; ++r) {
    Step step;
    for (int p = 0; p < n; ++p)
      if (p != r) {
        step.sends.push_back({p, bytes_of(r, p)});
        step.receives.push_back(p);
      }
    s.lanes[r][0].push_back(std::move(step));
  }
}

Schedule direct_all_gather(const CollectiveSpec& c) {
  auto s = empty_schedule("direct", c.ranks);
  const auto blocks = block_bytes(c);
  all_to_all_step(s, [&](int r, int) { return blocks[r]; });
  return s;
}

// Reduce-scatter: rank p reduces chunk p, so everyone sends it chunk p.
Schedule direct_reduce_scatter(const CollectiveSpec& c) {
  auto s = empty_schedule("direct", c.ranks);
  const auto chunk = chunks(c, c.ranks);
  all_to_all_step(s, [&](int, int p) { return chunk[p]; });
  return s;
}

// Then all-gather: rank r sends its reduced chunk r to everyone.
Schedule direct_all_reduce(const CollectiveSpec& c) {
  auto s = direct_reduce_scatter(c);
  const auto chunk = chunks(c, c.ranks);
  all_to_all_step(s, [&](int r, int) { return chunk[r]; });
  return s;
}

// `steps` all-to-all steps: every rank to every other at once.
ScheduleCounts direct_counts(double n, double steps) {
  const double messages = steps * n * (n - 1);
  return {.messages = messages, .pairs = n * (n - 1), .in_flight = n * (n - 1), .schedule_transfers = messages};
}
ScheduleCounts direct_all_reduce_counts(int n) { return direct_counts(n, 2); }
ScheduleCounts direct_one_step_counts(int n) { return direct_counts(n, 1); }

Schedule parameter_server_all_reduce(const CollectiveSpec& c) {
  auto s = empty_schedule("ps", c.ranks);
  const int n = c.ranks;
  if (n == 1) return s;
  const double bytes = static_cast<double>(c.elements * c.element_size);
  Step gather, scatter;
  for (int r = 1; r < n; ++r) {
    s.lanes[r][0].push_back({{{0, bytes}}, {}});
    s.lanes[r][0].push_back({{}, {0}});
    gather.receives.push_back(r);
    scatter.sends.push_back({r, bytes});
  }
  s.lanes[0][0] = {gather, scatter};
  return s;
}

ScheduleCounts parameter_server_all_reduce_counts(int ranks) {
  const double n = ranks, messages = 2 * (n - 1);  // to rank 0 and back
  return {.messages = messages, .pairs = messages, .in_flight = n, .schedule_transfers = messages};
}

// Rabenseifner: recursive-halving reduce-scatter then recursive-doubling all-gather
// over the largest power of two p <= n; the n - p extra ranks first hand their whole
// buffer to a partner (rank - p) and get the result back at the end.
Schedule halving_doubling_all_reduce(const CollectiveSpec& c) {
  auto s = empty_schedule("halving_doubling", c.ranks);
  const int n = c.ranks;
  if (n == 1) return s;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const double whole = static_cast<double>(c.elements * c.element_size);
  for (int r = p; r < n; ++r) {
    s.lanes[r][0].push_back({{{r - p, whole}}, {}});
    s.lanes[r][0].push_back({{}, {r - p}});
    s.lanes[r - p][0].push_back({{}, {r}});
  }
  // Each of the p ranks tracks the element range it is responsible for.
  for (int r = 0; r < p; ++r) {
    std::int64_t begin = 0, end = c.elements;
    std::vector<std::pair<std::int64_t, std::int64_t>> history;
    for (int d = p / 2; d >= 1; d /= 2) {
      const int partner = r ^ d;
      const std::int64_t mid = begin + (end - begin) / 2;
      // The lower rank keeps the lower half; each sends the half it gives away.
      const bool lower = (r & d) == 0;
      const auto give = lower ? std::pair{mid, end} : std::pair{begin, mid};
      history.push_back({begin, end});
      s.lanes[r][0].push_back(
          {{{partner, static_cast<double>((give.second - give.first) * c.element_size)}}, {partner}});
      if (lower) end = mid; else begin = mid;
    }
    for (int d = 1; d < p; d *= 2) {
      const int partner = r ^ d;
      s.lanes[r][0].push_back({{{partner, static_cast<double>((end - begin) * c.element_size)}}, {partner}});
      const auto [b, e] = history.back();
      history.pop_back();
      begin = b;
      end = e;
    }
  }
  for (int r = p; r < n; ++r) s.lanes[r - p][0].push_back({{{r, whole}}, {}});
  return s;
}

// The p ranks send one message per halving and per doubling round, to the same partners
// (r ^ d); each of the n - p extra ranks sends its buffer and receives the result.
ScheduleCounts halving_doubling_all_reduce_counts(int ranks) {
  const double n = ranks, p = std::exp2(std::floor(std::log2(n))), rounds = std::log2(p);
  const double messages = 2 * p * rounds + 2 * (n - p);
  return {.messages = messages, .pairs = p * rounds + 2 * (n - p), .in_flight = n, .schedule_transfers = messages};
}

// Two binary trees, each reducing then broadcasting half the buffer: tree A is the
// heap order over ranks 0..n-1 (parent of i is (i-1)/2), tree B the same over the
// reversed order, so that most leaves of one tree are inner nodes of the other.
Schedule double_binary_tree_all_reduce(const CollectiveSpec& c) {
  auto s = empty_schedule("tree", c.ranks, 2);
  const int n = c.ranks;
  if (n == 1) return s;
  for (int tree = 0; tree < 2; ++tree) {
    const double bytes = chunk_bytes(c.elements, c.element_size, 2, tree);
    auto rank_of = [&](int position) { return tree == 0 ? position : n - 1 - position; };
    for (int pos = 0; pos < n; ++pos) {
      const int r = rank_of(pos);
      std::vector<int> children;
      for (int child : {2 * pos + 1, 2 * pos + 2})
        if (child < n) children.push_back(rank_of(child));
      auto& lane = s.lanes[r][tree];
      if (!children.empty()) lane.push_back({{}, children});  // reduce: children's partial sums
      if (pos > 0) {
        const int parent = rank_of((pos - 1) / 2);
        lane.push_back({{{parent, bytes}}, {}});
        lane.push_back({{}, {parent}});  // broadcast: the result from the parent
      }
      if (!children.empty()) {
        Step down;
        for (int child : children) down.sends.push_back({child, bytes});
        lane.push_back(std::move(down));
      }
    }
  }
  return s;
}

// Per tree, every edge carries a partial sum up and the result down; the two trees can
// share pairs (at two ranks they are the same edge), so pairs is a bound.
ScheduleCounts double_binary_tree_all_reduce_counts(int ranks) {
  const double n = ranks, messages = 4 * (n - 1);
  return {.messages = messages, .pairs = messages, .in_flight = 2 * n, .schedule_transfers = messages};
}

// Binomial tree over ranks relative to the root: relative rank v receives from
// v - 2^k (the highest set bit of v) and then sends to v + 2^j for each 2^j > v.
Schedule binomial_broadcast(const CollectiveSpec& c) {
  auto s = empty_schedule("binomial", c.ranks);
  const int n = c.ranks;
  if (c.root < 0 || c.root >= n) throw std::invalid_argument(fmt::format("broadcast: root {} of {} ranks", c.root, n));
  const double bytes = static_cast<double>(c.elements * c.element_size);
  for (int v = 0; v < n; ++v) {
    auto& lane = s.lanes[mod(v + c.root, n)][0];
    int mask = 1;
    while (mask <= v) mask <<= 1;
    if (v > 0) lane.push_back({{}, {mod(v - (mask >> 1) + c.root, n)}});
    for (; v + mask < n; mask <<= 1) lane.push_back({{{mod(v + mask + c.root, n), bytes}}, {}});
  }
  return s;
}

// Every rank but the root receives the buffer once.
ScheduleCounts binomial_broadcast_counts(int ranks) {
  const double messages = ranks - 1.0;
  return {.messages = messages, .pairs = messages, .in_flight = messages, .schedule_transfers = messages};
}

}  // namespace

double chunk_bytes(std::int64_t elements, std::int64_t element_size, int parts, int i) {
  return static_cast<double>(chunk_elements(elements, parts, i) * element_size);
}

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::Broadcast: return "broadcast";
  }
  return "?";
}

const std::vector<CollectiveAlgorithm>& collective_algorithms() {
  using K = CollectiveKind;
  static const std::vector<CollectiveAlgorithm> table{
      {Algorithm::Auto, "auto",
       "the fastest candidate on the network in use: simulated alone on its topology and model, or the cheapest "
       "closed form where collectives are closed forms",
       {}, false},
      {Algorithm::Ring, "ring", "each rank passes chunks to its successor, n - 1 steps per reduce-scatter or all-gather",
       {{K::AllReduce, ring_all_reduce, ring_all_reduce_counts},
        {K::ReduceScatter, ring_reduce_scatter, ring_one_pass_counts},
        {K::AllGather, ring_all_gather, ring_one_pass_counts}},
       true},
      {Algorithm::HalvingDoubling, "halving_doubling", "recursive halving then doubling (Rabenseifner)",
       {{K::AllReduce, halving_doubling_all_reduce, halving_doubling_all_reduce_counts}}, true},
      {Algorithm::DoubleBinaryTree, "tree", "two binary trees, half the buffer each (NCCL's double binary tree)",
       {{K::AllReduce, double_binary_tree_all_reduce, double_binary_tree_all_reduce_counts}}, true},
      {Algorithm::Direct, "direct", "every rank to every other rank at once (multi-port)",
       {{K::AllReduce, direct_all_reduce, direct_all_reduce_counts},
        {K::ReduceScatter, direct_reduce_scatter, direct_one_step_counts},
        {K::AllGather, direct_all_gather, direct_one_step_counts}},
       false},
      {Algorithm::ParameterServer, "ps", "every rank to rank 0 and back (a parameter server)",
       {{K::AllReduce, parameter_server_all_reduce, parameter_server_all_reduce_counts}}, false},
      {Algorithm::Binomial, "binomial", "binomial tree from the root", {{K::Broadcast, binomial_broadcast, binomial_broadcast_counts}}, true},
  };
  return table;
}

const CollectiveAlgorithm& collective_algorithm(Algorithm a) {
  for (const auto& entry : collective_algorithms())
    if (entry.id == a) return entry;
  throw std::logic_error(fmt::format("collective algorithm {} is not in the table", static_cast<int>(a)));
}

const char* to_string(Algorithm a) {
  for (const auto& entry : collective_algorithms())
    if (entry.id == a) return entry.name;
  return "?";
}

std::string algorithm_names(const char* separator, const char* last_separator) {
  std::string out;
  const auto& table = collective_algorithms();
  for (std::size_t i = 0; i < table.size(); ++i)
    out += (i == 0 ? "" : i + 1 == table.size() ? last_separator : separator) + std::string(table[i].name);
  return out;
}

Algorithm parse_algorithm(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& entry : collective_algorithms()) {
    if (name == entry.name) return entry.id;
    names.emplace_back(entry.name);
  }
  throw std::invalid_argument(fmt::format("unknown collective algorithm \"{}\"{} (expected one of: {})", name,
                                          config::did_you_mean(name, names), algorithm_names()));
}

std::vector<Algorithm> algorithms_for(CollectiveKind kind) {
  std::vector<Algorithm> out;
  for (const auto& entry : collective_algorithms())
    for (const auto& impl : entry.implementations)
      if (impl.kind == kind) out.push_back(entry.id);
  return out;
}

std::vector<Algorithm> auto_candidates(CollectiveKind kind) {
  std::vector<Algorithm> out;
  for (Algorithm a : algorithms_for(kind))
    if (collective_algorithm(a).auto_candidate) out.push_back(a);
  return out;
}

ScheduleCounts schedule_counts(Algorithm a, CollectiveKind kind, int ranks) {
  for (const auto& impl : collective_algorithm(a).implementations)
    if (impl.kind == kind) return ranks < 2 ? ScheduleCounts{} : impl.counts(ranks);
  throw std::invalid_argument(fmt::format("{} has no \"{}\" algorithm", to_string(kind), to_string(a)));
}

Schedule make_schedule(const CollectiveSpec& c) {
  if (c.ranks < 1) throw std::invalid_argument(fmt::format("collective over {} ranks", c.ranks));
  for (const auto& entry : collective_algorithms())
    if (entry.id == c.algorithm)
      for (const auto& impl : entry.implementations)
        if (impl.kind == c.kind) return impl.schedule(c);
  throw std::invalid_argument(
      fmt::format("{} has no \"{}\" algorithm", to_string(c.kind), to_string(c.algorithm)));
}

Schedule exchange_schedule(const std::vector<std::vector<int>>& peers, const std::vector<double>& bytes) {
  auto s = empty_schedule("exchange", static_cast<int>(peers.size()));
  for (std::size_t r = 0; r < peers.size(); ++r) {
    Step step;
    for (int p : peers[r]) {
      step.sends.push_back({p, bytes[r]});
      step.receives.push_back(p);
    }
    s.lanes[r][0].push_back(std::move(step));
  }
  return s;
}

int Schedule::lane_count(int rank) const {
  return lanes.empty() ? 1 : static_cast<int>(lanes.at(rank).size());
}

std::size_t Schedule::step_count(int rank, int lane) const {
  return lanes.empty() ? static_cast<std::size_t>(ring.steps) : lanes.at(rank).at(lane).size();
}

const Step& Schedule::step(int rank, int lane, std::size_t k, Step& scratch) const {
  if (!lanes.empty()) return lanes[rank][lane][k];
  scratch.sends.assign(1, ring_send(rank, k));
  scratch.receives.assign(1, ring_receive_from(rank));
  return scratch;
}

Transfer Schedule::ring_send(int rank, std::size_t k) const {
  return {rank + 1 == ring.ranks ? 0 : rank + 1, ring.chunk[static_cast<std::size_t>(ring_chunk(rank, k))]};
}

double Schedule::bytes_sent(int rank) const {
  double b = 0.0;
  Step scratch;
  for (int lane = 0; lane < lane_count(rank); ++lane)
    for (std::size_t k = 0; k < step_count(rank, lane); ++k)
      for (const auto& t : step(rank, lane, k, scratch).sends) b += t.bytes;
  return b;
}

double Schedule::bytes_received(int rank) const {
  double b = 0.0;
  Step scratch;
  for (int r = 0; r < size(); ++r)
    for (int lane = 0; lane < lane_count(r); ++lane)
      for (std::size_t k = 0; k < step_count(r, lane); ++k)
        for (const auto& t : step(r, lane, k, scratch).sends)
          if (t.peer == rank) b += t.bytes;
  return b;
}

std::size_t Schedule::messages() const {
  std::size_t m = 0;
  Step scratch;
  for (int r = 0; r < size(); ++r)
    for (int lane = 0; lane < lane_count(r); ++lane)
      for (std::size_t k = 0; k < step_count(r, lane); ++k) m += step(r, lane, k, scratch).sends.size();
  return m;
}

}  // namespace dtsim::net
