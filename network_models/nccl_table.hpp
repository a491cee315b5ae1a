// net::NcclTable: nccl-tests' result table (all_reduce_perf and its siblings), written
// the same way for a simulated sweep (`dtsim collective`, runner/collective_table.hpp)
// and a measured one (bench/nccl_bench.cpp), so the two can be diffed: same columns,
// same bus bandwidth factors, same JSON keys.
//
// Per row: size (bytes asked for), count (elements), type, redop, root, time, algbw =
// payload bytes / time (1e9 bytes/s), busbw = algbw x bus_factor. A simulated table also
// shows the schedule's algorithm (a column "algo"); a measured one the elements that
// differed from the expected result ("#wrong"; NCCL picks its algorithm unseen).
//
// JSON: {"source": "simulated" | "measured", "op": "all_reduce", "ranks": n,
//        "setup": {how the figures were obtained: model and links, or iterations},
//        "rows": [{"bytes", "count", "type", "redop", "root", "time_us", "algbw_GBps",
//                  "busbw_GBps", "algorithm", "bytes_sent_per_rank", "wrong"}]}
// with the same keys in every row of either source: null where the source does not know
// (a measurement's algorithm and bytes sent, a simulation's #wrong).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network_models/schedule.hpp"

namespace dtsim::net {

enum class TableSource { Simulated, Measured };
const char* to_string(TableSource source);  // "simulated", "measured"

// nccl-tests' factor from algbw to busbw over `ranks` ranks (its src/*.cu, BusBw):
// all-reduce 2(n-1)/n; reduce-scatter and all-gather (n-1)/n, the size being the whole
// buffer of n blocks; broadcast 1.
double bus_factor(CollectiveKind kind, int ranks);
// payload_bytes / seconds in 1e9 bytes/s; 0 for a zero time (one rank, nothing to do).
double algbw_GBps(double payload_bytes, double seconds);
// Parses "8", "4K", "16M", "1G" (powers of 1024, as nccl-tests reads -b and -e); a
// negative size or one beyond int64 throws std::invalid_argument.
std::int64_t parse_nccl_size(const std::string& text);

struct NcclRow {
  std::int64_t bytes = 0;  // the size asked for
  std::int64_t count = 0;  // elements
  std::string type = "float";
  std::string redop = "sum";  // "sum", "avg", or "none" for a collective that does not reduce
  int root = -1;              // -1 unless the collective has a root
  double time_us = 0.0;
  double algbw_GBps = 0.0;
  double busbw_GBps = 0.0;
  std::optional<std::string> algorithm;       // simulated: the schedule's algorithm
  std::optional<double> bytes_sent_per_rank;  // simulated: the schedule's bytes, averaged over ranks
  std::optional<std::int64_t> wrong;          // measured: elements that differ from the expected result
};

// A row of `kind` over `ranks` ranks that took `seconds` for `payload_bytes` (count x
// the type's size): fp32, summed if the collective reduces ("none" otherwise), root -1.
NcclRow nccl_row(CollectiveKind kind, int ranks, std::int64_t bytes, std::int64_t count, double payload_bytes,
                 double seconds);

struct NcclTable {
  TableSource source = TableSource::Simulated;
  CollectiveKind op = CollectiveKind::AllReduce;
  int ranks = 1;
  std::string title;  // the first line, after "# "
  nlohmann::json setup = nlohmann::json::object();
  std::vector<NcclRow> rows;
};

// The text in three parts, so a measurement can print each row as it is measured:
// the title, "#" and the column names; one row; the footer ("# Out of bounds values"
// where measured, "# Avg bus bandwidth").
std::string nccl_table_header(const NcclTable& table);
std::string nccl_table_row(const NcclTable& table, const NcclRow& row);
std::string nccl_table_footer(const NcclTable& table);
std::string format_nccl_table(const NcclTable& table);  // all three, every row
nlohmann::json nccl_table_json(const NcclTable& table);

}  // namespace dtsim::net
