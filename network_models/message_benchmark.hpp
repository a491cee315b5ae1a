// nccl-tests' point-to-point operations as messages: sendrecv_perf (every rank sends the
// size to the next rank and receives it from the previous) and alltoall_perf (every rank
// sends size / n to each other rank), all sent at once on a fresh network of a model, where
// they share links (flow) or a described machine's ports (nccl) as the model shares them.
#pragma once

#include <cstdint>
#include <string>

#include "network_models/nccl_table.hpp"
#include "network_models/network.hpp"
#include "network_models/topology.hpp"

namespace dtsim::net {

// Seconds from sending every message of `op` (SendRecv or AllToAll; std::invalid_argument
// otherwise), `message_bytes` each, on a fresh network of `config` over `topology`, to the
// last one's arrival.
double message_benchmark_seconds(NcclTestOp op, const NetworkConfig& config, const Topology& topology,
                                 double message_bytes);

// One size of the benchmark as nccl-tests runs it: fp32 elements (alltoall: count / n of
// them to each peer).
struct MessageBenchmark {
  double seconds = 0.0;             // on a described machine at least its host's G launches
  std::int64_t message_bytes = 0;   // each message's
  std::string algorithm;            // NCCL's p2p protocol ("P2P/LL", "P2P/Simple"), or "direct"
};
// `bytes` of `op` over `ranks` ranks: on a described machine (config.nccl) over its ports,
// launched `gpus_per_thread` GPUs from one thread (nccl-tests' -g); otherwise over `links`
// (required then).
MessageBenchmark message_benchmark(NcclTestOp op, const NetworkConfig& config, int ranks, const Topology* links,
                                   std::int64_t bytes, int gpus_per_thread = 1);

}  // namespace dtsim::net
