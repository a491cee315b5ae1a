#include "runner/collective_table.hpp"

#include <charconv>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/closed_form.hpp"
#include "network_models/collective_execution.hpp"

namespace dtsim::runner {

std::int64_t parse_size(const std::string& text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string suffix(end, text.data() + text.size());
  std::int64_t scale = 1;
  if (suffix == "K" || suffix == "k") scale = 1 << 10;
  else if (suffix == "M" || suffix == "m") scale = 1 << 20;
  else if (suffix == "G" || suffix == "g") scale = 1LL << 30;
  else if (!suffix.empty()) ec = std::errc::invalid_argument;
  if (ec != std::errc() || value < 0 || value > std::numeric_limits<std::int64_t>::max() / scale)
    throw std::invalid_argument(fmt::format("size \"{}\": expected a number of bytes with an optional K, M or G", text));
  return value * scale;
}

net::CollectiveKind parse_collective(const std::string& text) {
  if (text == "allreduce" || text == "all_reduce") return net::CollectiveKind::AllReduce;
  if (text == "reducescatter" || text == "reduce_scatter") return net::CollectiveKind::ReduceScatter;
  if (text == "allgather" || text == "all_gather") return net::CollectiveKind::AllGather;
  if (text == "broadcast") return net::CollectiveKind::Broadcast;
  throw std::invalid_argument(
      fmt::format("unknown collective \"{}\" (expected allreduce, reducescatter, allgather or broadcast)", text));
}

double bus_factor(net::CollectiveKind kind, int n) {
  switch (kind) {
    case net::CollectiveKind::AllReduce: return 2.0 * (n - 1) / n;
    case net::CollectiveKind::ReduceScatter:
    case net::CollectiveKind::AllGather: return static_cast<double>(n - 1) / n;
    case net::CollectiveKind::Broadcast: return 1.0;
  }
  return 1.0;
}

std::vector<CollectiveRow> run_collective_sweep(const CollectiveSweep& s) {
  if (s.min_bytes < 0 || s.max_bytes < s.min_bytes)
    throw std::invalid_argument(fmt::format("sizes: expected 0 <= min ({}) <= max ({})", s.min_bytes, s.max_bytes));
  if (s.step_bytes <= 0 && !(s.factor > 1.0))
    throw std::invalid_argument(fmt::format("step factor must be > 1, got {}", s.factor));
  const auto topology = net::make_topology(s.topology, s.ranks, s.link);
  net::NetworkConfig config;
  config.model = s.model;
  config.nominal = s.link;
  config.algorithms[s.kind] = s.algorithm;  // `auto` means the cheapest by closed form
  std::vector<CollectiveRow> rows;
  for (std::int64_t bytes = s.min_bytes; bytes <= s.max_bytes;) {
    net::CollectiveSpec spec{.kind = s.kind, .algorithm = s.algorithm, .elements = bytes / 4, .root = s.root};
    spec.block_elements.assign(s.ranks, spec.elements / s.ranks);
    spec = net::resolve_collective(spec, s.ranks, config);
    const auto schedule = net::make_schedule(spec);
    double seconds = 0.0;
    if (s.model == "analytical") {
      seconds = net::closed_form_seconds(spec, s.link.latency_s, s.link.bandwidth_bytes_per_s);
    } else {
      const auto finish = net::simulate(s.model, topology, schedule, std::vector<double>(s.ranks, 0.0));
      for (double t : finish) seconds = std::max(seconds, t);
    }
    const double payload = static_cast<double>(spec.elements * 4);
    const double algbw = seconds > 0 ? payload / seconds / 1e9 : 0.0;
    double sent = 0.0;
    for (int r = 0; r < s.ranks; ++r) sent += schedule.bytes_sent(r);
    rows.push_back({bytes, spec.elements, net::to_string(spec.algorithm), seconds, algbw,
                    algbw * bus_factor(s.kind, s.ranks), sent / s.ranks});
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

std::string format_collective_table(const CollectiveSweep& s, const std::vector<CollectiveRow>& rows) {
  std::string out = fmt::format(
      "# dtsim collective: {} on {} ({} ranks), model {}, links {:g} us / {:g} GB/s\n#\n", net::to_string(s.kind),
      net::make_topology(s.topology, s.ranks, s.link).kind(), s.ranks, s.model, s.link.latency_s * 1e6,
      s.link.bandwidth_bytes_per_s / 1e9);
  out += fmt::format("# {:>12} {:>12} {:>8} {:>6} {:>6} {:>17} {:>12} {:>12} {:>12}\n", "size", "count", "type",
                     "redop", "root", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
  double busbw_sum = 0.0;
  const bool rooted = s.kind == net::CollectiveKind::Broadcast;
  const bool reduces = s.kind == net::CollectiveKind::AllReduce || s.kind == net::CollectiveKind::ReduceScatter;
  for (const auto& r : rows) {
    out += fmt::format("  {:>12} {:>12} {:>8} {:>6} {:>6} {:>17} {:>12.2f} {:>12.2f} {:>12.2f}\n", r.bytes, r.count,
                       "float", reduces ? "sum" : "none", rooted ? s.root : -1, r.algorithm, r.time_s * 1e6, r.algbw,
                       r.busbw);
    busbw_sum += r.busbw;
  }
  out += fmt::format("# Avg bus bandwidth    : {:.4f}\n", rows.empty() ? 0.0 : busbw_sum / rows.size());
  return out;
}

nlohmann::json collective_table_json(const CollectiveSweep& s, const std::vector<CollectiveRow>& rows) {
  nlohmann::json j = {{"collective", net::to_string(s.kind)},
                      {"topology", net::make_topology(s.topology, s.ranks, s.link).kind()},
                      {"ranks", s.ranks},
                      {"model", s.model},
                      {"latency_us", s.link.latency_s * 1e6},
                      {"bandwidth_GBps", s.link.bandwidth_bytes_per_s / 1e9},
                      {"rows", nlohmann::json::array()}};
  for (const auto& r : rows)
    j["rows"].push_back({{"size", r.bytes}, {"count", r.count}, {"algorithm", r.algorithm}, {"time_us", r.time_s * 1e6},
                         {"algbw", r.algbw}, {"busbw", r.busbw}, {"bytes_sent_per_rank", r.bytes_sent_per_rank}});
  return j;
}

}  // namespace dtsim::runner
