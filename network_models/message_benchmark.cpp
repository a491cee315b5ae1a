#include "network_models/message_benchmark.hpp"

#include <algorithm>
#include <stdexcept>

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

}  // namespace dtsim::net
