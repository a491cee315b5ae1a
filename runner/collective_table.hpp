// `dtsim collective`: one of nccl-tests' operations over a range of sizes on a simulated
// network, printed as nccl-tests prints its measurements, so predicted and measured tables
// can be compared line by line: the table, its busbw factors and its JSON are
// network_models/nccl_table.hpp's, which bench/nccl_bench.cpp writes too.
//
// The communicator's collectives run their schedule (or, on a described machine, NCCL's
// choice); reduce only on a described machine (dtsim has no reduce schedule); sendrecv
// and alltoall are their point-to-point messages, all sent at once on a fresh network of
// the model (sharing links or ports as the model does), the time the last one arrives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network_models/nccl/nccl_model.hpp"
#include "network_models/nccl_table.hpp"
#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"

namespace dtsim::runner {

struct CollectiveSweep {
  net::NcclTestOp op = net::NcclTestOp::AllReduce;
  net::Algorithm algorithm = net::Algorithm::Ring;  // Auto: per size, net::fastest_algorithm's choice
  net::TopologySpec topology;
  int ranks = 8;
  std::string model = "flow";
  net::LinkParams link{5e-6, 12.5e9};
  std::int64_t min_bytes = 8, max_bytes = 1 << 20;
  double factor = 2.0;  // multiplicative step between sizes
  std::int64_t step_bytes = 0;  // additive step instead, when > 0
  std::vector<std::int64_t> sizes;  // these sizes, in this order, instead of the range when not empty
  int root = 0;
  // A model of a described machine (nccl): its system and NCCL_ALGO / NCCL_PROTO, and how
  // many GPUs the benchmark launches from one thread (nccl-tests' -g: its host launches can
  // outlast the GPUs).
  std::shared_ptr<const net::nccl::Config> nccl;
  int gpus_per_thread = 1;
};

// A row: nccl-tests' columns plus the schedule's algorithm (the one `auto` chose) and
// bytes sent per rank.
using CollectiveRow = net::NcclRow;

// Parses "8", "4K", "16M", "1G" (powers of 1024, as nccl-tests does); a size beyond
// int64 is an error.
std::int64_t parse_size(const std::string& text);
// allreduce, reducescatter, allgather, broadcast, reduce, sendrecv, alltoall (and
// nccl-tests' names: all_reduce, ...).
net::NcclTestOp parse_test_op(const std::string& text);
using net::bus_factor;

std::vector<CollectiveRow> run_collective_sweep(const CollectiveSweep& sweep);
// The size after `bytes` in the sweep (min_bytes first), or nullopt after the last one.
std::optional<std::int64_t> next_collective_size(const CollectiveSweep& sweep, std::int64_t bytes);
// The sweep's rows as a simulated nccl-tests table (title: the collective, topology,
// model and links; setup: topology, model, latency_us, bandwidth_GBps; for the nccl model
// the system, NCCL_ALGO / NCCL_PROTO and gpus_per_thread instead of the topology and links,
// and each row's algorithm NCCL's choice: "Ring/LL128/24ch").
net::NcclTable collective_table(const CollectiveSweep& sweep, std::vector<CollectiveRow> rows);
std::string format_collective_table(const CollectiveSweep& sweep, const std::vector<CollectiveRow>& rows);
nlohmann::json collective_table_json(const CollectiveSweep& sweep, const std::vector<CollectiveRow>& rows);

}  // namespace dtsim::runner
