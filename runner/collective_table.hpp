// `dtsim collective`: one collective over a range of sizes on a simulated network,
// printed as nccl-tests prints its measurements, so predicted and measured tables can
// be compared line by line.
//
// algbw = size / time; busbw = algbw * factor, with nccl-tests' factors: 2(n-1)/n for
// all-reduce, (n-1)/n for reduce-scatter and all-gather (size = the whole buffer, n
// blocks), 1 for broadcast.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"

namespace dtsim::runner {

struct CollectiveSweep {
  net::CollectiveKind kind = net::CollectiveKind::AllReduce;
  net::Algorithm algorithm = net::Algorithm::Ring;
  net::TopologySpec topology;
  int ranks = 8;
  std::string model = "flow";
  net::LinkParams link{5e-6, 12.5e9};
  std::int64_t min_bytes = 8, max_bytes = 1 << 20;
  double factor = 2.0;  // multiplicative step between sizes
  std::int64_t step_bytes = 0;  // additive step instead, when > 0
  int root = 0;
};

struct CollectiveRow {
  std::int64_t bytes;
  std::int64_t count;  // elements (fp32)
  std::string algorithm;
  double time_s;
  double algbw;  // GB/s
  double busbw;  // GB/s
  double bytes_sent_per_rank;
};

// Parses "8", "4K", "16M", "1G" (powers of 1024, as nccl-tests does); a size beyond
// int64 is an error.
std::int64_t parse_size(const std::string& text);
net::CollectiveKind parse_collective(const std::string& text);  // allreduce, reducescatter, allgather, broadcast
double bus_factor(net::CollectiveKind kind, int ranks);

std::vector<CollectiveRow> run_collective_sweep(const CollectiveSweep& sweep);
// The size after `bytes` in the sweep (min_bytes first), or nullopt after the last one.
std::optional<std::int64_t> next_collective_size(const CollectiveSweep& sweep, std::int64_t bytes);
std::string format_collective_table(const CollectiveSweep& sweep, const std::vector<CollectiveRow>& rows);
nlohmann::json collective_table_json(const CollectiveSweep& sweep, const std::vector<CollectiveRow>& rows);

}  // namespace dtsim::runner
