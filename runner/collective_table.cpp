#include "runner/collective_table.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/fastest_algorithm.hpp"

namespace dtsim::runner {

std::int64_t parse_size(const std::string& text) { return net::parse_nccl_size(text); }

net::CollectiveKind parse_collective(const std::string& text) {
  if (text == "allreduce" || text == "all_reduce") return net::CollectiveKind::AllReduce;
  if (text == "reducescatter" || text == "reduce_scatter") return net::CollectiveKind::ReduceScatter;
  if (text == "allgather" || text == "all_gather") return net::CollectiveKind::AllGather;
  if (text == "broadcast") return net::CollectiveKind::Broadcast;
  throw std::invalid_argument(
      fmt::format("unknown collective \"{}\" (expected allreduce, reducescatter, allgather or broadcast)", text));
}

std::vector<CollectiveRow> run_collective_sweep(const CollectiveSweep& s) {
  if (s.min_bytes < 0 || s.max_bytes < s.min_bytes)
    throw std::invalid_argument(fmt::format("sizes: expected 0 <= min ({}) <= max ({})", s.min_bytes, s.max_bytes));
  if (s.step_bytes <= 0 && !(s.factor > 1.0))
    throw std::invalid_argument(fmt::format("step factor must be > 1, got {}", s.factor));
  const auto& model = net::network_model(s.model);
  net::NetworkConfig config;
  config.model = s.model;
  config.nominal = s.link;
  config.nccl = s.nccl;
  // A described machine times the collective itself (NCCL's choice of algorithm).
  const auto clock = model.make_clock ? model.make_clock(config, s.ranks) : nullptr;
  const auto topology = clock ? net::Topology::ring(1, s.link) : net::make_topology(s.topology, s.ranks, s.link);
  std::optional<net::FastestAlgorithm> fastest;
  if (!clock && s.algorithm == net::Algorithm::Auto) fastest.emplace(model, topology, s.link);
  std::vector<CollectiveRow> rows;
  for (std::int64_t bytes = s.min_bytes; bytes <= s.max_bytes;) {
    net::CollectiveSpec spec{
        .kind = s.kind, .algorithm = s.algorithm, .ranks = s.ranks, .elements = bytes / 4, .root = s.root};
    spec.block_elements.assign(s.ranks, spec.elements / s.ranks);
    CollectiveRow row;
    if (clock) {
      row = net::nccl_row(s.kind, s.ranks, bytes, spec.elements, static_cast<double>(spec.elements * 4),
                          clock->benchmark_seconds(spec, s.gpus_per_thread));
      row.algorithm = clock->describe(spec);
      row.bytes_sent_per_rank = clock->bytes_sent_per_rank(spec);
    } else {
      // `auto`: per size, the candidate fastest on this topology and model, timed once
      // while it is chosen.
      std::optional<double> seconds;
      if (fastest) {
        const auto choice = fastest->choose(spec);
        spec.algorithm = choice.algorithm;
        seconds = choice.seconds;
      }
      const auto schedule = net::make_schedule(spec);
      if (!seconds) seconds = net::seconds_alone(model, topology, s.link, spec, schedule);
      double sent = 0.0;
      for (int r = 0; r < s.ranks; ++r) sent += schedule.bytes_sent(r);
      row = net::nccl_row(s.kind, s.ranks, bytes, spec.elements, static_cast<double>(spec.elements * 4), *seconds);
      row.algorithm = net::to_string(spec.algorithm);
      row.bytes_sent_per_rank = sent / s.ranks;
    }
    if (s.kind == net::CollectiveKind::Broadcast) row.root = s.root;
    rows.push_back(std::move(row));
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
    nlohmann::json setup = {{"model", s.model},
                            {"system", net::nccl::system_json(sys)},
                            {"gpus_per_thread", s.gpus_per_thread}};
    if (!s.nccl->overrides.algo.empty()) setup["nccl_algo"] = s.nccl->overrides.algo;
    if (!s.nccl->overrides.proto.empty()) setup["nccl_proto"] = s.nccl->overrides.proto;
    return {.source = net::TableSource::Simulated,
            .op = s.kind,
            .ranks = s.ranks,
            .title = fmt::format("dtsim collective: {} on {} ({} ranks: {} node{} of {}), model {} (NCCL 2.18's choices{}), "
                                 "{} GPU{} per thread (host launch {:g} us per GPU)",
                                 net::to_string(s.kind), sys.name, s.ranks, nodes, nodes == 1 ? "" : "s", per_node,
                                 s.model, nccl_env, s.gpus_per_thread, s.gpus_per_thread == 1 ? "" : "s",
                                 sys.host.launch_us),
            .setup = setup,
            .rows = std::move(rows)};
  }
  const std::string topology = net::make_topology(s.topology, s.ranks, s.link).kind();
  return {.source = net::TableSource::Simulated,
          .op = s.kind,
          .ranks = s.ranks,
          .title = fmt::format("dtsim collective: {} on {} ({} ranks), model {}, links {:g} us / {:g} GB/s",
                               net::to_string(s.kind), topology, s.ranks, s.model, s.link.latency_s * 1e6,
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
