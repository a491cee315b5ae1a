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
// JSON: {"source": "simulated" | "measured", "op": "all_reduce" (to_string(NcclTestOp)), "ranks": n,
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

// What a table measures: one of nccl-tests' binaries (all_reduce_perf, ...). The first
// four are the communicator's collectives; reduce is NCCL's (root gets the sum);
// sendrecv: every rank sends the size to the next and receives it from the previous;
// alltoall: every rank sends size / n to each rank.
enum class NcclTestOp { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, SendRecv, AllToAll };
const char* to_string(NcclTestOp op);  // nccl-tests' names: "all_reduce", ..., "reduce", "sendrecv", "alltoall"
NcclTestOp test_op(CollectiveKind kind);
// The collective a test times, if it is one of the communicator's.
std::optional<CollectiveKind> collective_kind(NcclTestOp op);
bool has_root(NcclTestOp op);  // broadcast, reduce

// nccl-tests' factor from algbw to busbw over `ranks` ranks (its src/*.cu, BusBw):
// all-reduce 2(n-1)/n; reduce-scatter, all-gather and alltoall (n-1)/n, the size being
// the whole buffer of n blocks; broadcast, reduce and sendrecv 1.
double bus_factor(NcclTestOp op, int ranks);
inline double bus_factor(CollectiveKind kind, int ranks) { return bus_factor(test_op(kind), ranks); }
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

// A row of `op` over `ranks` ranks that took `seconds` for `payload_bytes` (count x
// the type's size): fp32, summed if the op reduces ("none" otherwise), root -1.
NcclRow nccl_row(NcclTestOp op, int ranks, std::int64_t bytes, std::int64_t count, double payload_bytes,
                 double seconds);
inline NcclRow nccl_row(CollectiveKind kind, int ranks, std::int64_t bytes, std::int64_t count, double payload_bytes,
                        double seconds) {
  return nccl_row(test_op(kind), ranks, bytes, count, payload_bytes, seconds);
}

// dtsim_nccl_bench's title: "dtsim_nccl_bench: all_reduce, 8 rank(s), <how>" (its text
// table is read back by nccl_tests_output.hpp, which takes the operation and ranks from it).
std::string nccl_bench_title(NcclTestOp op, int ranks, const std::string& how);

struct NcclTable {
  TableSource source = TableSource::Simulated;
  NcclTestOp op = NcclTestOp::AllReduce;
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
