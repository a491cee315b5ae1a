#include "network_models/nccl_table.hpp"

#include <charconv>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net {

const char* to_string(TableSource source) { return source == TableSource::Simulated ? "simulated" : "measured"; }

const char* to_string(NcclTestOp op) {
  switch (op) {
    case NcclTestOp::AllReduce: return "all_reduce";
    case NcclTestOp::ReduceScatter: return "reduce_scatter";
    case NcclTestOp::AllGather: return "all_gather";
    case NcclTestOp::Broadcast: return "broadcast";
    case NcclTestOp::Reduce: return "reduce";
    case NcclTestOp::SendRecv: return "sendrecv";
    case NcclTestOp::AllToAll: return "alltoall";
  }
  return "?";
}

NcclTestOp test_op(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return NcclTestOp::AllReduce;
    case CollectiveKind::ReduceScatter: return NcclTestOp::ReduceScatter;
    case CollectiveKind::AllGather: return NcclTestOp::AllGather;
    case CollectiveKind::Broadcast: return NcclTestOp::Broadcast;
  }
  return NcclTestOp::AllReduce;
}

std::optional<CollectiveKind> collective_kind(NcclTestOp op) {
  switch (op) {
    case NcclTestOp::AllReduce: return CollectiveKind::AllReduce;
    case NcclTestOp::ReduceScatter: return CollectiveKind::ReduceScatter;
    case NcclTestOp::AllGather: return CollectiveKind::AllGather;
    case NcclTestOp::Broadcast: return CollectiveKind::Broadcast;
    case NcclTestOp::Reduce:
    case NcclTestOp::SendRecv:
    case NcclTestOp::AllToAll: return std::nullopt;
  }
  return std::nullopt;
}

bool has_root(NcclTestOp op) { return op == NcclTestOp::Broadcast || op == NcclTestOp::Reduce; }

double bus_factor(NcclTestOp op, int n) {
  switch (op) {
    case NcclTestOp::AllReduce: return 2.0 * (n - 1) / n;
    case NcclTestOp::ReduceScatter:
    case NcclTestOp::AllGather:
    case NcclTestOp::AllToAll: return static_cast<double>(n - 1) / n;
    case NcclTestOp::Broadcast:
    case NcclTestOp::Reduce:
    case NcclTestOp::SendRecv: return 1.0;
  }
  return 1.0;
}

double algbw_GBps(double payload_bytes, double seconds) { return seconds > 0 ? payload_bytes / seconds / 1e9 : 0.0; }

std::int64_t parse_nccl_size(const std::string& text) {
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

NcclRow nccl_row(NcclTestOp op, int ranks, std::int64_t bytes, std::int64_t count, double payload_bytes,
                 double seconds) {
  const bool reduces = op == NcclTestOp::AllReduce || op == NcclTestOp::ReduceScatter || op == NcclTestOp::Reduce;
  NcclRow row{.bytes = bytes, .count = count, .redop = reduces ? "sum" : "none", .time_us = seconds * 1e6};
  row.algbw_GBps = algbw_GBps(payload_bytes, seconds);
  row.busbw_GBps = row.algbw_GBps * bus_factor(op, ranks);
  return row;
}

std::string nccl_bench_title(NcclTestOp op, int ranks, const std::string& how) {
  return fmt::format("dtsim_nccl_bench: {}, {} rank(s), {}", to_string(op), ranks, how);
}

namespace {

// The columns: "algo" in a simulated table, "#wrong" in a measured one.
bool shows_algorithm(const NcclTable& t) { return t.source == TableSource::Simulated; }
bool shows_wrong(const NcclTable& t) { return t.source == TableSource::Measured; }

}  // namespace

std::string nccl_table_header(const NcclTable& t) {
  std::string out = fmt::format("# {}\n#\n", t.title);
  out += fmt::format("# {:>12} {:>12} {:>8} {:>6} {:>6}", "size", "count", "type", "redop", "root");
  if (shows_algorithm(t)) out += fmt::format(" {:>17}", "algo");
  out += fmt::format(" {:>12} {:>12} {:>12}", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
  if (shows_wrong(t)) out += fmt::format(" {:>8}", "#wrong");
  return out + "\n";
}

std::string nccl_table_row(const NcclTable& t, const NcclRow& r) {
  std::string out = fmt::format("  {:>12} {:>12} {:>8} {:>6} {:>6}", r.bytes, r.count, r.type, r.redop, r.root);
  if (shows_algorithm(t)) out += fmt::format(" {:>17}", r.algorithm.value_or("-"));
  out += fmt::format(" {:>12.2f} {:>12.2f} {:>12.2f}", r.time_us, r.algbw_GBps, r.busbw_GBps);
  if (shows_wrong(t)) out += r.wrong ? fmt::format(" {:>8}", *r.wrong) : fmt::format(" {:>8}", "-");
  return out + "\n";
}

std::string nccl_table_footer(const NcclTable& t) {
  std::string out;
  if (shows_wrong(t)) {
    std::int64_t wrong = 0;
    for (const auto& r : t.rows) wrong += r.wrong.value_or(0);
    out += fmt::format("# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  }
  double busbw_sum = 0.0;
  for (const auto& r : t.rows) busbw_sum += r.busbw_GBps;
  out += fmt::format("# Avg bus bandwidth    : {:.4f}\n", t.rows.empty() ? 0.0 : busbw_sum / t.rows.size());
  return out;
}

std::string format_nccl_table(const NcclTable& t) {
  std::string out = nccl_table_header(t);
  for (const auto& r : t.rows) out += nccl_table_row(t, r);
  return out + nccl_table_footer(t);
}

nlohmann::json nccl_table_json(const NcclTable& t) {
  auto or_null = [](const auto& optional) { return optional ? nlohmann::json(*optional) : nlohmann::json(); };
  nlohmann::json j = {{"source", to_string(t.source)},
                      {"op", to_string(t.op)},
                      {"ranks", t.ranks},
                      {"setup", t.setup},
                      {"rows", nlohmann::json::array()}};
  for (const auto& r : t.rows)
    j["rows"].push_back({{"bytes", r.bytes},
                         {"count", r.count},
                         {"type", r.type},
                         {"redop", r.redop},
                         {"root", r.root},
                         {"time_us", r.time_us},
                         {"algbw_GBps", r.algbw_GBps},
                         {"busbw_GBps", r.busbw_GBps},
                         {"algorithm", or_null(r.algorithm)},
                         {"bytes_sent_per_rank", or_null(r.bytes_sent_per_rank)},
                         {"wrong", or_null(r.wrong)}});
  return j;
}

}  // namespace dtsim::net
