// nccl-tests' point-to-point operations as messages: sendrecv_perf (every rank sends the
// size to the next rank and receives it from the previous) and alltoall_perf (every rank
// sends size / n to each other rank), all sent at once on a fresh network of a model, where
// they share links (flow) or a described machine's ports (nccl) as the model shares them.
#pragma once

#include "network_models/nccl_table.hpp"
#include "network_models/network.hpp"
#include "network_models/topology.hpp"

namespace dtsim::net {

// Seconds from sending every message of `op` (SendRecv or AllToAll; std::invalid_argument
// otherwise), `message_bytes` each, on a fresh network of `config` over `topology`, to the
// last one's arrival.
double message_benchmark_seconds(NcclTestOp op, const NetworkConfig& config, const Topology& topology,
                                 double message_bytes);

}  // namespace dtsim::net
