#include "runner/resource_estimate.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/registry.hpp"
#include "network_models/network.hpp"
#include "network_models/closed_form.hpp"
#include "network_models/network_model.hpp"
#include "network_models/topology_kinds.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::runner {

namespace {

constexpr double kFloat = 4.0;
constexpr double kRankBookkeeping = 16.0 * 1024;  // frames, communicator, workload, algorithm objects
constexpr double kReplayRankBookkeeping = 4.0 * 1024;  // a replaying rank: frame, communicator, timer
constexpr double kRecordPerRankStep = 320.0;      // rank_program's records, summary, RunResult
constexpr double kReplayRecordPerRankStep = 160.0;
constexpr double kTracedOp = 32.0;
constexpr double kResultJsonPerStep = 6 * 40.0;   // the result's six per-step series, as JSON
constexpr double kLongRun = 1e9;                  // simulated events worth a note
constexpr double kBookkeepingPerEvent = 10.0;     // bookkeeping steps as fast as one event
constexpr double kRecurrencePerBookkeeping = 8.0;  // a ring recurrence's messages as fast as one bookkeeping step

double d(std::int64_t x) { return static_cast<double>(x); }

// One copy of the topology: links, adjacency, failed flags; the gossip graph when it is
// computed; the BFS trees when messages are routed.
double topology_copy_bytes(const net::TopologyShape& t, bool gossip_graph, bool routed) {
  double b = 2 * t.cables * 24 + t.nodes * 40 + 2 * t.cables * 4 + 2 * t.cables / 8 + 256;
  if (gossip_graph) b += t.ranks * 40 + t.ranks * t.degree * 4 + 2 * t.nodes * 4 /* the BFS's distances */;
  if (routed) b += std::min(256.0, t.ranks) * (t.nodes * 4 + 64);
  return b;
}

// What building it takes besides the result: the edge list (with growth) and the set.
double topology_build_transient(const net::TopologyShape& t) { return t.cables * 48 + (t.dedup ? t.cables * 48 : 0); }

// --- collectives ------------------------------------------------------------------------

// A collective's counts, from its algorithm's entry (network_models/schedule.hpp); `auto`
// left unresolved counts as the ring.
net::ScheduleCounts collective_cost(net::Algorithm a, net::CollectiveKind kind, double n) {
  return net::schedule_counts(a == net::Algorithm::Auto ? net::Algorithm::Ring : a, kind, static_cast<int>(n));
}

net::Algorithm resolved(net::CollectiveKind kind, const Scenario& s, double elements) {
  net::CollectiveSpec spec;
  spec.kind = kind;
  spec.ranks = s.ranks;
  spec.elements = static_cast<std::int64_t>(std::min(elements, 1e15));
  if (kind == net::CollectiveKind::AllGather) spec.block_elements.assign(static_cast<std::size_t>(s.ranks), spec.elements);
  try {
    return net::resolve_collective(spec, s.ranks, s.network).algorithm;
  } catch (const std::exception&) {
    return net::Algorithm::Ring;
  }
}

// --- the workload -----------------------------------------------------------------------

// What the workload needs, from its registry entry (workloads/workload_registry.hpp).
workloads::WorkloadFootprint workload_shape(const Scenario& s) {
  return workloads::workload_entry(s.workload.type).footprint(s.workload, s.ranks);
}

// --- the estimate -------------------------------------------------------------------------

// What the estimate knows besides its numbers, for the refusal's message.
struct Detail {
  ResourceEstimate e;
  net::TopologyShape topology;
  std::string route_cause;  // what dominates route_bytes
  bool route_from_gossip = false;
};

// The estimate's parts, each from the layer that knows it: the workload's footprint, the
// algorithm's, the topology kind's shape, the network model's entry and the collective
// algorithms' counts; the constants above are dtsim's own bookkeeping.
class Estimator {
 public:
  Estimator(const Scenario& s, RunKind kind)
      : s_(s),
        live_(kind == RunKind::Live),
        timing_only_(!live_ && s.timing_only),
        R_(std::max(1, s.ranks)),
        steps_(d(s.steps)),
        w_(workload_shape(s)),
        f_(algorithms::memory_footprint(s.algorithm, w_.sizes_backward, s.steps)),
        t_(net::topology_shape(s.topology, s.ranks)),
        model_(net::network_model(s.network.model)),
        collectives_routed_(!model_.closed_form_collectives),
        M_(w_.elements * kFloat),
        P_(f_.payload_fraction * M_ + 8 * d(static_cast<std::int64_t>(w_.sizes_backward.size()))),
        main_kind_(f_.gathers ? net::CollectiveKind::AllGather : net::CollectiveKind::AllReduce),
        all_reduce_(resolved(net::CollectiveKind::AllReduce, s, w_.elements)),
        main_alg_(f_.gathers ? resolved(main_kind_, s, f_.payload_fraction * w_.elements) : all_reduce_),
        reduce_cost_(collective_cost(all_reduce_, net::CollectiveKind::AllReduce, R_)),
        main_cost_(f_.gathers ? collective_cost(main_alg_, main_kind_, R_) : reduce_cost_) {}

  Detail run() {
    out_.topology = t_;
    out_.e.model_elements = w_.elements;
    out_.e.tensor_ranks = live_ || timing_only_ ? 1 : R_;
    tensors();
    topology();
    if (!live_) routes();
    records();
    if (!live_) work();
    return out_;
  }

 private:
  // One rank's tensors, and the ranks' together.
  void tensors() {
    auto& e = out_.e;
    const double momentum = s_.algorithm.optimizer.momentum > 0 ? 1 : 0;
    const double peers = f_.gossips || f_.model_buffers_per_peer > 0 ? t_.degree : 0;
    e.peer_message_bytes = f_.model_buffers_per_peer * peers * M_ + (f_.gossips ? peers * P_ : 0);
    const double gathered_blocks = timing_only_ ? 1 : R_;  // the representative's blocks are one clone
    e.gathered_bytes = f_.gathers ? (gathered_blocks + 1) * P_ : 0;
    e.workload_rank_bytes = w_.per_rank_bytes;
    e.rank_tensor_bytes = M_ * (2 + momentum + 3 + f_.model_buffers) + e.peer_message_bytes + (f_.gossips ? 2 * P_ : 0) +
                          e.gathered_bytes + e.workload_rank_bytes;
    const double shared = live_ ? 0 : M_ + (f_.gathers && !timing_only_ ? R_ * P_ : 0);
    e.tensor_bytes = e.tensor_ranks * e.rank_tensor_bytes + shared;
    e.data_bytes = w_.data_bytes;
  }

  // One copy of the topology (two in timing-only mode: the replay's network copies it).
  void topology() {
    const double copies = timing_only_ ? 2 : 1;
    out_.e.topology_bytes = copies * topology_copy_bytes(t_, gossip_graph(), routed() && !live_) +
                            topology_build_transient(t_) + (f_.gossips ? R_ * 8 : 0) /* a mixing row */;
  }

  // Routes, schedules and messages in flight (emulated networks only).
  void routes() {
    auto route_bytes = [&](const net::ScheduleCounts& c) {
      const double hops = c.neighbour_pairs ? t_.neighbour_hops : t_.hops;
      return collectives_routed_ ? c.pairs * (80 + 4 * hops) : 0.0;
    };
    auto flight = [&](const net::ScheduleCounts& c) {
      return c.schedule_transfers * 20 + R_ * 8 + R_ * 200 + (collectives_routed_ ? c.in_flight * 128 : 0.0);
    };
    const double collective_routes = route_bytes(reduce_cost_) + (f_.gathers ? route_bytes(main_cost_) : 0);
    const double gossip_routes = f_.gossips ? R_ * t_.degree * (80 + 4 * t_.neighbour_hops + 128) : 0;
    out_.e.route_bytes = collective_routes + gossip_routes + std::max(flight(reduce_cost_), flight(main_cost_));
    out_.route_from_gossip = gossip_routes > collective_routes;
    out_.route_cause = fmt::format("the {} {}", net::to_string(f_.gathers ? main_alg_ : all_reduce_),
                                   net::to_string(f_.gathers ? main_kind_ : net::CollectiveKind::AllReduce));
  }

  // Per-step records, the result file, and each rank's bookkeeping.
  void records() {
    auto& e = out_.e;
    if (live_) e.record_bytes = steps_ * kRecordPerRankStep;
    else if (timing_only_)
      e.record_bytes = steps_ * (kRecordPerRankStep + f_.traced_ops_per_step * kTracedOp) +
                       R_ * steps_ * kReplayRecordPerRankStep;
    else e.record_bytes = R_ * steps_ * kRecordPerRankStep;
    e.record_bytes += steps_ * kResultJsonPerStep;
    e.rank_bookkeeping_bytes = live_          ? kRankBookkeeping
                               : timing_only_ ? kRankBookkeeping + R_ * kReplayRankBookkeeping
                                              : R_ * kRankBookkeeping;
  }

  // Work: simulated events and set-up visits (emulated networks only).
  void work() {
    auto& e = out_.e;
    // The analytical model fires one completion per rank, but the emulated world still
    // builds the schedule of every distinct collective and walks it for each rank's bytes
    // sent (net::Network::plan): bookkeeping steps, about one step's collectives' worth.
    const bool analytical = !collectives_routed_;
    const double evaluations = s_.eval_every > 0 ? std::floor((steps_ - 1) / d(s_.eval_every)) : 0;
    const double calls = steps_ * f_.collectives_per_step, closing = 5 + 2 * evaluations;
    // Rings are computed from their recurrence (net::ring_done_times on a model whose
    // messages never interact; net::RingWavefront on the flow model, but for its coupled
    // senders' messages): a fraction of a bookkeeping step a message, no events.
    const auto& p = s_.network.perturbations;
    const bool recurrence = model_.rings_as_recurrence && s_.network.evaluate_rings && p.jitter_s == 0 &&
                            p.bandwidth_trace.empty() && p.failures.empty();
    const double ring_simulated = model_.rings_simulate_coupled_senders ? t_.coupled_ring_share : 0.0;
    const double main_share = recurrence && main_alg_ == net::Algorithm::Ring ? ring_simulated : 1.0;
    const double reduce_share = recurrence && all_reduce_ == net::Algorithm::Ring ? ring_simulated : 1.0;
    const double main_per_call = f_.gossips ? 0.0 : main_cost_.messages;
    const double main_messages = calls * main_per_call * main_share + closing * reduce_cost_.messages * reduce_share;
    e.bookkeeping_steps += (calls * main_per_call * (1 - main_share) + closing * reduce_cost_.messages * (1 - reduce_share)) /
                           kRecurrencePerBookkeeping;
    const double gossip_messages = f_.gossips ? calls * R_ * t_.degree : 0.0;
    e.network_events = (analytical ? (calls + closing) * R_ : main_messages) + gossip_messages + steps_ * 12 * R_;
    e.network_events *= model_.relative_events_per_message;
    if (analytical)
      e.bookkeeping_steps += (f_.gossips ? 0.0 : f_.collectives_per_step * main_cost_.messages) + reduce_cost_.messages;
    const double bfs = t_.nodes + 2 * t_.cables;
    if (gossip_graph()) e.bookkeeping_steps += 2 * R_ * bfs;
    if (f_.gossips) e.bookkeeping_steps += R_ * R_;  // mixing rows
    if (routed()) e.bookkeeping_steps += R_ * bfs;  // one BFS tree per source
  }

  bool gossip_graph() const { return f_.gossips || timing_only_; }
  bool routed() const { return collectives_routed_ || f_.gossips; }

  const Scenario& s_;
  const bool live_, timing_only_;
  const double R_, steps_;
  const workloads::WorkloadFootprint w_;
  const algorithms::MemoryFootprint f_;
  const net::TopologyShape t_;
  const net::NetworkModel& model_;
  const bool collectives_routed_;
  const double M_;  // bytes of the model
  const double P_;  // bytes of one payload
  const net::CollectiveKind main_kind_;
  const net::Algorithm all_reduce_, main_alg_;
  const net::ScheduleCounts reduce_cost_, main_cost_;
  Detail out_;
};

Detail estimate(const Scenario& s, RunKind kind) { return Estimator(s, kind).run(); }

std::string limit_text(const MemoryLimit& limit) {
  if (limit.source == "DTSIM_MEMORY_LIMIT") return fmt::format("the {} DTSIM_MEMORY_LIMIT allows", format_bytes(limit.bytes));
  if (limit.source == "MemAvailable") return fmt::format("the {} this machine has available", format_bytes(limit.bytes));
  return fmt::format("the {} {} leaves", format_bytes(limit.bytes), limit.source);
}

// 4095, 1.8e13.
std::string count(double x) {
  if (!(x >= 1e6) || !std::isfinite(x)) return fmt::format("{:.0f}", x);
  int exponent = static_cast<int>(std::floor(std::log10(x)));
  double mantissa = std::round(x / std::pow(10.0, exponent) * 10) / 10;
  if (mantissa >= 10) mantissa /= 10, ++exponent;
  return fmt::format("{:.1f}e{}", mantissa, exponent);
}

std::optional<double> read_number_file(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(word.c_str(), &end);
  if (errno != 0 || end == word.c_str()) return std::nullopt;
  return v;
}

// A key of a "key value" file (/proc/meminfo's "MemAvailable: 123 kB", memory.stat's
// "inactive_file 123").
std::optional<double> read_key(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string k;
    double v = 0;
    if (!(words >> k >> v)) continue;
    if (!k.empty() && k.back() == ':') k.pop_back();
    if (k != key) continue;
    std::string unit;
    words >> unit;
    return unit == "kB" ? v * 1024 : v;
  }
  return std::nullopt;
}

}  // namespace

double ResourceEstimate::total_bytes() const {
  return tensor_bytes + data_bytes + topology_bytes + route_bytes + record_bytes + rank_bookkeeping_bytes;
}

ResourceEstimate estimate_resources(const Scenario& s, RunKind kind) { return estimate(s, kind).e; }

double topology_build_bytes(const net::TopologySpec& spec, int ranks) {
  const auto t = net::topology_shape(spec, ranks);
  return topology_copy_bytes(t, false, false) + topology_build_transient(t);
}

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::size_t u = 0;
  while (bytes >= 1024 && u + 1 < std::size(units)) bytes /= 1024, ++u;
  if (u + 1 == std::size(units) && bytes >= 1024) return fmt::format("{:.2g} EiB", bytes);
  return bytes < 10 && u > 0 ? fmt::format("{:.1f} {}", bytes, units[u]) : fmt::format("{:.0f} {}", bytes, units[u]);
}

double parse_memory_size(const std::string& text) {
  const auto bad = [&] {
    return config::InputError(fmt::format("DTSIM_MEMORY_LIMIT: expected a number of bytes with an optional K, M, G "
                                             "or T suffix (powers of 1024), or \"unlimited\", got \"{}\"",
                                             text));
  };
  if (text.empty()) throw bad();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !std::isfinite(v) || v < 0) throw bad();
  std::string suffix(end);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.size() == 2 && (suffix[1] == 'i' || suffix[1] == 'I')) suffix.pop_back();  // KiB, GiB
  double scale = 1;
  if (suffix.size() > 1) throw bad();
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'k': case 'K': scale = 1024.0; break;
      case 'm': case 'M': scale = 1024.0 * 1024; break;
      case 'g': case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: throw bad();
    }
  }
  return v * scale;
}

std::optional<MemoryLimit> memory_limit() {
  if (const char* env = std::getenv("DTSIM_MEMORY_LIMIT"); env && *env) {
    const std::string text = env;
    if (text == "unlimited" || text == "none" || text == "off") return std::nullopt;
    return MemoryLimit{parse_memory_size(text), "DTSIM_MEMORY_LIMIT"};
  }
  std::optional<MemoryLimit> best;
  if (const auto avail = read_key("/proc/meminfo", "MemAvailable")) best = MemoryLimit{*avail, "MemAvailable"};
  // cgroup v2, then v1: the limit minus what the group uses (its inactive page cache is
  // reclaimable, as MemAvailable counts it).
  auto cgroup = [&](const char* max_file, const char* current_file, const char* stat_file) {
    const auto max = read_number_file(max_file);
    const auto current = read_number_file(current_file);
    if (!max || !current || *max > 1e18) return;
    const double reclaimable = read_key(stat_file, "inactive_file").value_or(0.0);
    const double left = std::max(0.0, *max - std::max(0.0, *current - reclaimable));
    if (!best || left < best->bytes) best = MemoryLimit{left, "the cgroup's memory.max"};
  };
  cgroup("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat");
  cgroup("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
         "/sys/fs/cgroup/memory/memory.stat");
  return best;
}

void check_topology_fits(const Scenario& s) {
  // Most topologies are small: then the limit (a few files read) is not even looked up.
  const double bytes = topology_build_bytes(s.topology, s.ranks);
  if (bytes < 64.0 * 1024 * 1024) return;
  const auto limit = memory_limit();
  if (!limit || bytes <= limit->bytes) return;
  const auto t = net::topology_shape(s.topology, s.ranks);
  throw ScenarioError("/topology", ErrorKind::too_large, fmt::format("a {} topology of {} ranks ({} cables) needs about {} to build (links, "
                                               "adjacency lists and the builder's edge set), more than {}: use fewer "
                                               "ranks or a sparser topology (ring, torus, fat_tree)",
                                               t.label, s.ranks, count(t.cables), format_bytes(bytes), limit_text(*limit)));
}

namespace {

// The one-line refusal of a scenario whose estimate exceeds the limit, by its largest
// part: what needs the memory and the way out.
class Refusal {
 public:
  Refusal(const Scenario& s, RunKind kind, const Detail& detail, const MemoryLimit& limit)
      : s_(s), detail_(detail), e_(detail.e), need_(format_bytes(e_.total_bytes())),
        more_(limit_text(limit)), per_rank_(format_bytes(e_.rank_tensor_bytes)) {
    const bool emulated = kind == RunKind::Emulated && !s.timing_only;
    ranks_of_ = fmt::format("{} {}ranks of {}", s.ranks, emulated ? "emulated " : "", s.workload.type);
  }

  [[noreturn]] void raise() const {
    const double parts[] = {e_.tensor_bytes, e_.data_bytes, e_.topology_bytes, e_.route_bytes, e_.record_bytes,
                            e_.rank_bookkeeping_bytes};
    switch (std::max_element(std::begin(parts), std::end(parts)) - std::begin(parts)) {
      case 0: tensors();
      case 1: data();
      case 2: topology();
      case 3: routes();
      case 4: records();
      default: bookkeeping();
    }
  }

 private:
  bool logistic() const { return s_.workload.type == "logistic_regression"; }

  [[noreturn]] void tensors() const {
    if (e_.peer_message_bytes > 0.5 * e_.rank_tensor_bytes && detail_.topology.degree > 2)
      throw ScenarioError("/topology", ErrorKind::too_large,
                          fmt::format("{} on a {} topology need about {} ({} per rank, most of it a message or replica "
                                      "per gossip neighbour: {} each), more than {}: use a sparser topology (ring, "
                                      "torus) or fewer ranks",
                                      ranks_of_, detail_.topology.label, need_, per_rank_,
                                      count(detail_.topology.degree), more_));
    if (e_.gathered_bytes > 0.5 * e_.rank_tensor_bytes && e_.tensor_ranks > 1)
      throw ScenarioError("/ranks", ErrorKind::too_large,
                          fmt::format("{} need about {} ({} per rank, most of it the all-gather's block from each of "
                                      "the {} ranks), more than {}: use \"timing_only\": true (memory of one rank) or "
                                      "fewer ranks",
                                      ranks_of_, need_, per_rank_, s_.ranks, more_));
    if (e_.tensor_ranks > 1)
      throw ScenarioError("/ranks", ErrorKind::too_large,
                          fmt::format("{} need about {} (parameters, gradients, algorithm state and messages: {} per "
                                      "rank), more than {}: {}",
                                      ranks_of_, need_, per_rank_, more_, fewer_ranks_way_out()));
    if (e_.workload_rank_bytes > 0.5 * e_.rank_tensor_bytes)
      throw ScenarioError("/workload/batch_size", ErrorKind::too_large,
                          fmt::format("one rank of {} needs about {} for its mini-batch ({} of {}), more than {}: use "
                                      "a smaller batch_size",
                                      s_.workload.type, need_, format_bytes(e_.workload_rank_bytes), per_rank_, more_));
    throw ScenarioError(logistic() ? "/workload/features" : "/workload/type", ErrorKind::too_large,
                        fmt::format("one rank of {} with {} parameters needs about {} (parameters, gradients and "
                                    "algorithm state: {}), more than {}: use {}",
                                    s_.workload.type, fmt::format("{:.0f}", e_.model_elements), need_, per_rank_, more_,
                                    logistic() ? "fewer features" : "a smaller model"));
  }

  // Timing-only mode, unless that too is refused (then say why).
  std::string fewer_ranks_way_out() const {
    Scenario one = s_;
    one.timing_only = true;
    try {
      check_resources(one, RunKind::Emulated);
    } catch (const ScenarioError& timing_only_too) {
      return fmt::format("use fewer ranks (in timing-only mode, {})", timing_only_too.what());
    }
    return "use \"timing_only\": true (memory of one rank) or fewer ranks";
  }

  [[noreturn]] void data() const {
    if (logistic()) {
      const auto set = workloads::data_source_entry(s_.workload.data.source).shape(s_.workload.data);
      const std::int64_t samples = set.train, features = set.sample_elements();
      throw ScenarioError(features >= samples ? "/workload/features" : "/workload/samples", ErrorKind::too_large,
                          fmt::format("the logistic_regression data set ({} samples x {} features, fp32, one copy "
                                      "shared by the ranks) needs about {}, more than {}: use fewer samples or features",
                                      samples, features, need_, more_));
    }
    throw ScenarioError("/workload", ErrorKind::too_large,
                        fmt::format("the {} data needs about {}, more than {}: use fewer samples", s_.workload.type,
                                    need_, more_));
  }

  [[noreturn]] void topology() const {
    throw ScenarioError("/topology", ErrorKind::too_large,
                        fmt::format("a {} topology of {} ranks needs about {} ({} for its links, adjacency lists, "
                                    "gossip graph and BFS trees), more than {}: use fewer ranks or a sparser topology "
                                    "(ring, torus, fat_tree)",
                                    detail_.topology.label, s_.ranks, need_, format_bytes(e_.topology_bytes), more_));
  }

  // Routes, schedules, messages in flight.
  [[noreturn]] void routes() const {
    if (detail_.route_from_gossip)
      throw ScenarioError("/topology", ErrorKind::too_large,
                          fmt::format("gossip among {} ranks on a {} topology needs about {} ({} of routes and "
                                      "messages in flight: {} neighbours each), more than {}: use a sparser topology "
                                      "(ring, torus) or fewer ranks",
                                      s_.ranks, detail_.topology.label, need_, format_bytes(e_.route_bytes),
                                      count(detail_.topology.degree), more_));
    throw ScenarioError("/network/algorithms", ErrorKind::too_large,
                        fmt::format("{} over {} ranks needs about {} ({} of routes, schedules and messages in flight), "
                                    "more than {}: use the ring algorithm or fewer ranks",
                                    detail_.route_cause, s_.ranks, need_, format_bytes(e_.route_bytes), more_));
  }

  [[noreturn]] void records() const {
    throw ScenarioError("/steps", ErrorKind::too_large,
                        fmt::format("{} steps of {} ranks need about {} ({} of per-step records), more than {}: use "
                                    "fewer steps",
                                    s_.steps, s_.ranks, need_, format_bytes(e_.record_bytes), more_));
  }

  [[noreturn]] void bookkeeping() const {
    throw ScenarioError("/ranks", ErrorKind::too_large,
                        fmt::format("{} ranks need about {} ({} of bookkeeping each), more than {}: use fewer ranks",
                                    s_.ranks, need_, format_bytes(e_.rank_bookkeeping_bytes / std::max(1, s_.ranks)),
                                    more_));
  }

  const Scenario& s_;
  const Detail& detail_;
  const ResourceEstimate& e_;
  std::string need_, more_, per_rank_, ranks_of_;
};

}  // namespace

void check_resources(const Scenario& s, RunKind kind) {
  const auto limit = memory_limit();
  if (!limit) return;
  const Detail detail = estimate(s, kind);
  if (detail.e.total_bytes() <= limit->bytes) return;
  Refusal(s, kind, detail, *limit).raise();  // the way out follows the largest part
}

namespace {

// Measured on 2 cores: about 4e6 events a second (alpha_beta), and ten times as many
// bookkeeping steps; so 1e9 is minutes and 1e10 an hour.
const char* how_long(double work) { return work > 10 * kLongRun ? "hours" : work > kLongRun ? "many minutes" : "minutes"; }

// The share of the steps whose collectives collective reuse may replay: on the time grid
// a step whose ranks enter it as in a step before is replayed, which in training is
// usually every step from the third (network_models/collective_reuse.hpp); none when
// reuse is off, jitter consumes draws per message, or the model does not replay (closed
// forms, or an entry without exact_collective_reuse).
double replayable_share(const Scenario& s) {
  const auto& model = net::network_model(s.network.model);
  if (!s.network.reuse_collectives || s.network.perturbations.jitter_s > 0 || model.closed_form_collectives ||
      !model.exact_collective_reuse || s.steps <= 2)
    return 0.0;
  return static_cast<double>(s.steps - 2) / static_cast<double>(s.steps);
}

}  // namespace

std::optional<std::string> long_run_note(const Scenario& s) {
  const auto e = estimate_resources(s, RunKind::Emulated);
  const double work = e.network_events + e.bookkeeping_steps / kBookkeepingPerEvent;
  if (work <= kLongRun) return std::nullopt;
  // With reuse the simulated steps may be two: say so where that changes the outlook.
  const double replayed_events = e.network_events * replayable_share(s);
  const double work_if_replayed = work - replayed_events;
  if (std::string_view(how_long(work_if_replayed)) != how_long(work) &&
      e.bookkeeping_steps / kBookkeepingPerEvent <= e.network_events)
    return fmt::format("note: about {} simulated network events; this run may take {}, or {} if collective reuse "
                       "replays every step after the second, as it does when steps repeat (network.reuse_collectives)",
                       count(e.network_events), how_long(work), how_long(work_if_replayed));
  if (e.bookkeeping_steps / kBookkeepingPerEvent > e.network_events)
    return fmt::format("note: about {} steps of bookkeeping (routes, the gossip graph, collective schedules and ring "
                       "recurrences over {} ranks on a {} topology); this run may take {}; fewer ranks or steps are "
                       "faster",
                       count(e.bookkeeping_steps), s.ranks, net::topology_shape(s.topology, s.ranks).label, how_long(work));
  const auto& alternative = net::network_model(s.network.model).faster_alternative;
  const std::string faster = alternative.empty() ? "" : fmt::format("{}, ", alternative);
  return fmt::format("note: about {} simulated network events; this run may take {}; {}fewer steps or fewer ranks are "
                     "faster",
                     count(e.network_events), how_long(work), faster);
}

}  // namespace dtsim::runner
