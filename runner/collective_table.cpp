#include "runner/collective_table.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/fastest_algorithm.hpp"
#include "network_models/message_benchmark.hpp"

namespace dtsim::runner {

std::int64_t parse_size(const std::string& text) { return net::parse_nccl_size(text); }

net::NcclTestOp parse_test_op(const std::string& text) {
  using Op = net::NcclTestOp;
  if (text == "allreduce" || text == "all_reduce") return Op::AllReduce;
  if (text == "reducescatter" || text == "reduce_scatter") return Op::ReduceScatter;
  if (text == "allgather" || text == "all_gather") return Op::AllGather;
  if (text == "broadcast") return Op::Broadcast;
  if (text == "reduce") return Op::Reduce;
  if (text == "sendrecv") return Op::SendRecv;
  if (text == "alltoall") return Op::AllToAll;
  throw std::invalid_argument(fmt::format(
      "unknown operation \"{}\" (expected allreduce, reducescatter, allgather, broadcast, reduce, sendrecv or alltoall)",
      text));
}

namespace {

// What a sweep's rows share: the model, its network config, the clock of a described
// machine, the topology messages and schedules run on.
struct SweepContext {
  const CollectiveSweep& s;
  const net::NetworkModel& model;
  net::NetworkConfig config;
  std::shared_ptr<const net::MachineClock> clock;
  const net::nccl::Clock* nccl_clock = nullptr;
  std::optional<net::Topology> topology;
  std::optional<net::FastestAlgorithm> fastest;
  double host_seconds = 0.0;  // a reduce's -g G at least: G launches from one thread (the clock's for the others)
};

// sendrecv, alltoall: their messages.
CollectiveRow messages_row(const SweepContext& c, std::int64_t bytes) {
  const auto& s = c.s;
  const auto b = net::message_benchmark(s.op, c.config, s.ranks, c.topology ? &*c.topology : nullptr, bytes,
                                        s.gpus_per_thread);
  const std::int64_t elements = bytes / 4;
  auto row = net::nccl_row(s.op, s.ranks, bytes, elements, static_cast<double>(elements * 4), b.seconds);
  row.algorithm = b.algorithm;
  const int peers = s.ranks < 2 ? 0 : s.op == net::NcclTestOp::SendRecv ? 1 : s.ranks - 1;
  row.bytes_sent_per_rank = static_cast<double>(b.message_bytes) * peers;
  return row;
}

// reduce: NCCL's choice on the machine.
CollectiveRow nccl_reduce_row(const SweepContext& c, std::int64_t bytes) {
  const std::int64_t elements = bytes / 4;
  const double payload = static_cast<double>(elements * 4);
  const auto run = c.nccl_clock->run(net::nccl::Coll::Reduce, payload);
  auto row = net::nccl_row(c.s.op, c.s.ranks, bytes, elements, payload, std::max(c.host_seconds, run.gpu_us * 1e-6));
  row.algorithm = net::nccl::describe(run.choice);
  row.bytes_sent_per_rank = net::nccl::bytes_sent_per_rank(c.nccl_clock->machine(), run.coll, run.bytes, run.choice);
  return row;
}

// One of the communicator's collectives: the machine's clock, or its schedule run alone
// (`auto`: per size, the candidate fastest on this topology and model, timed once while it
// is chosen).
CollectiveRow collective_row(SweepContext& c, net::CollectiveKind kind, std::int64_t bytes) {
  const auto& s = c.s;
  net::CollectiveSpec spec{.kind = kind, .algorithm = s.algorithm, .ranks = s.ranks, .elements = bytes / 4, .root = s.root};
  spec.block_elements.assign(s.ranks, spec.elements / s.ranks);
  const double payload = static_cast<double>(spec.elements * 4);
  if (c.clock) {
    auto row = net::nccl_row(s.op, s.ranks, bytes, spec.elements, payload, c.clock->benchmark_seconds(spec, s.gpus_per_thread));
    row.algorithm = c.clock->describe(spec);
    row.bytes_sent_per_rank = c.clock->bytes_sent_per_rank(spec);
    return row;
  }
  std::optional<double> seconds;
  if (c.fastest) {
    const auto choice = c.fastest->choose(spec);
    spec.algorithm = choice.algorithm;
    seconds = choice.seconds;
  }
  const auto schedule = net::make_schedule(spec);
  if (!seconds) seconds = net::seconds_alone(c.model, *c.topology, s.link, spec, schedule);
  double sent = 0.0;
  for (int r = 0; r < s.ranks; ++r) sent += schedule.bytes_sent(r);
  auto row = net::nccl_row(s.op, s.ranks, bytes, spec.elements, payload, *seconds);
  row.algorithm = net::to_string(spec.algorithm);
  row.bytes_sent_per_rank = sent / s.ranks;
  return row;
}

}  // namespace

std::vector<CollectiveRow> run_collective_sweep(const CollectiveSweep& s) {
  for (auto b : s.sizes)
    if (b < 0) throw std::invalid_argument(fmt::format("sizes: expected sizes >= 0, got {}", b));
  if (s.sizes.empty() && (s.min_bytes < 0 || s.max_bytes < s.min_bytes))
    throw std::invalid_argument(fmt::format("sizes: expected 0 <= min ({}) <= max ({})", s.min_bytes, s.max_bytes));
  if (s.sizes.empty() && s.step_bytes <= 0 && !(s.factor > 1.0))
    throw std::invalid_argument(fmt::format("step factor must be > 1, got {}", s.factor));
  SweepContext c{.s = s, .model = net::network_model(s.model)};
  c.config.model = s.model;
  c.config.nominal = s.link;
  c.config.nccl = s.nccl;
  // A described machine times the collective itself (NCCL's choice of algorithm).
  if (c.model.make_clock) c.clock = c.model.make_clock(c.config, s.ranks);
  c.nccl_clock = dynamic_cast<const net::nccl::Clock*>(c.clock.get());
  const auto collective = net::collective_kind(s.op);
  if (s.op == net::NcclTestOp::Reduce && !c.nccl_clock)
    throw std::invalid_argument(fmt::format("reduce: only the nccl model times it (the {} model has no reduce schedule)",
                                            s.model));
  // A described machine's collectives and messages go by its clock, not by links.
  if (!c.clock) c.topology = net::make_topology(s.topology, s.ranks, s.link);
  if (!c.clock && collective && s.algorithm == net::Algorithm::Auto) c.fastest.emplace(c.model, *c.topology, s.link);
  if (s.nccl) c.host_seconds = s.gpus_per_thread * s.nccl->system.host.launch_us * 1e-6;

  std::vector<CollectiveRow> rows;
  auto add = [&](std::int64_t bytes) {
    const bool messages = s.op == net::NcclTestOp::SendRecv || s.op == net::NcclTestOp::AllToAll;
    CollectiveRow row = messages     ? messages_row(c, bytes)
                        : collective ? collective_row(c, *collective, bytes)
                                     : nccl_reduce_row(c, bytes);
    if (net::has_root(s.op)) row.root = s.root;
    rows.push_back(std::move(row));
  };
  if (!s.sizes.empty()) {
    for (auto bytes : s.sizes) add(bytes);
    return rows;
  }
  for (std::int64_t bytes = s.min_bytes; bytes <= s.max_bytes;) {
    add(bytes);
    const auto next = next_collective_size(s, bytes);
    if (!next) break;
    bytes = *next;
  }
  return rows;
}

std::optional<std::int64_t> next_collective_size(const CollectiveSweep& s, std::int64_t bytes) {
  if (bytes >= s.max_bytes) return std::nullopt;
  if (s.step_bytes > 0) {
    if (s.step_bytes > s.max_bytes - bytes) return std::nullopt;  // also keeps bytes + step from overflowing
    return bytes + s.step_bytes;
  }
  // In doubles first: bytes * factor may exceed any int64 (casting it would be undefined).
  const double grown = static_cast<double>(bytes) * s.factor;
  if (!(grown < 0x1p63)) return std::nullopt;  // also NaN
  const auto next = std::max(bytes + 1, static_cast<std::int64_t>(grown));
  if (next > s.max_bytes) return std::nullopt;
  return next;
}

net::NcclTable collective_table(const CollectiveSweep& s, std::vector<CollectiveRow> rows) {
  if (s.nccl) {
    const auto& sys = s.nccl->system;
    const int per_node = std::min(s.ranks, sys.gpus_per_node);
    const int nodes = s.ranks / per_node;
    std::string nccl_env;
    if (!s.nccl->overrides.algo.empty()) nccl_env += fmt::format(", NCCL_ALGO={}", s.nccl->overrides.algo);
    if (!s.nccl->overrides.proto.empty()) nccl_env += fmt::format(", NCCL_PROTO={}", s.nccl->overrides.proto);
    const net::nccl::NcclEnv unset;
    for (const auto& var : net::nccl::nccl_env_vars())
      if (s.nccl->env.*var.value != unset.*var.value) nccl_env += fmt::format(", {}={}", var.name, s.nccl->env.*var.value);
    nlohmann::json setup = {{"model", s.model}, {"gpus_per_thread", s.gpus_per_thread}};
    net::nccl::add_config_json(*s.nccl, setup);  // the system, NCCL_ALGO, NCCL_PROTO and the channel bounds
    return {.source = net::TableSource::Simulated,
            .op = s.op,
            .ranks = s.ranks,
            .title = fmt::format("dtsim collective: {} on {} ({} ranks: {} node{} of {}), model {} (NCCL {}'s choices{}), "
                                 "{} GPU{} per thread (host launch {:g} us per GPU)",
                                 net::to_string(s.op), sys.name, s.ranks, nodes, nodes == 1 ? "" : "s", per_node,
                                 s.model, net::nccl::to_string(sys.nccl), nccl_env, s.gpus_per_thread, s.gpus_per_thread == 1 ? "" : "s",
                                 sys.host.launch_us),
            .setup = setup,
            .rows = std::move(rows)};
  }
  const std::string topology = net::make_topology(s.topology, s.ranks, s.link).kind();
  return {.source = net::TableSource::Simulated,
          .op = s.op,
          .ranks = s.ranks,
          .title = fmt::format("dtsim collective: {} on {} ({} ranks), model {}, links {:g} us / {:g} GB/s",
                               net::to_string(s.op), topology, s.ranks, s.model, s.link.latency_s * 1e6,
                               s.link.bandwidth_bytes_per_s / 1e9),
          .setup = {{"topology", topology},
                    {"model", s.model},
                    {"latency_us", s.link.latency_s * 1e6},
                    {"bandwidth_GBps", s.link.bandwidth_bytes_per_s / 1e9}},
          .rows = std::move(rows)};
}

std::string format_collective_table(const CollectiveSweep& s, const std::vector<CollectiveRow>& rows) {
  return net::format_nccl_table(collective_table(s, rows));
}

nlohmann::json collective_table_json(const CollectiveSweep& s, const std::vector<CollectiveRow>& rows) {
  return net::nccl_table_json(collective_table(s, rows));
}

}  // namespace dtsim::runner
