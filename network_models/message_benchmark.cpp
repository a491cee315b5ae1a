#include "network_models/message_benchmark.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/nccl/collective_time.hpp"
#include "network_models/nccl/nccl_model.hpp"
#include "sim/engine.hpp"

namespace dtsim::net {

double message_benchmark_seconds(NcclTestOp op, const NetworkConfig& config, const Topology& topology,
                                 double message_bytes) {
  if (op != NcclTestOp::SendRecv && op != NcclTestOp::AllToAll)
    throw std::invalid_argument("message_benchmark_seconds: expected sendrecv or alltoall");
  sim::Engine engine;
  Network network(engine, topology, config);
  const int n = topology.size();
  double last = 0.0;
  auto arrived = [&] { last = std::max(last, engine.now()); };
  engine.call_at(0.0, [&] {
    for (int r = 0; r < n; ++r) {
      // alltoall: to the next rank first, then on around the ring, as NCCL's grouped
      // send/recv orders its peers.
      const int peers = op == NcclTestOp::SendRecv ? std::min(n - 1, 1) : n - 1;
      for (int k = 1; k <= peers; ++k) network.send(r, (r + k) % n, message_bytes, arrived);
    }
  });
  engine.run();
  return last;
}

MessageBenchmark message_benchmark(NcclTestOp op, const NetworkConfig& config, int ranks, const Topology* links,
                                   std::int64_t bytes, int gpus_per_thread) {
  MessageBenchmark out;
  const std::int64_t elements = bytes / 4;
  out.message_bytes = (op == NcclTestOp::SendRecv ? elements : elements / std::max(ranks, 1)) * 4;
  const auto message = static_cast<double>(out.message_bytes);
  if (config.nccl) {
    // The machine's clock times the messages: its topology's links only need to exist,
    // and add no latency of their own.
    const Topology ring = Topology::ring(ranks, {0.0, nccl::nominal_link(config.nccl->system).bandwidth_bytes_per_s});
    out.seconds = std::max(gpus_per_thread * config.nccl->system.host.launch_us * 1e-6,
                           message_benchmark_seconds(op, config, ring, message));
    out.algorithm =
        fmt::format("P2P/{}", nccl::to_string(nccl::p2p_protocol(nccl::make_machine(config.nccl->system, ranks, config.nccl->env), message)));
    return out;
  }
  if (!links || links->size() != ranks)
    throw std::invalid_argument("message_benchmark: expected the links of every rank");
  out.seconds = message_benchmark_seconds(op, config, *links, message);
  out.algorithm = "direct";
  return out;
}

}  // namespace dtsim::net
