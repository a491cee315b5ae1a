// net::ClockTransport: the transport of the models of a described machine (the nccl
// model), each message timed by its MachineClock.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "network_models/machine_clock.hpp"
#include "network_models/port_flows.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {

// Messages timed by a MachineClock: a message from src to dst goes on the wire once its
// route's fixed part (the perturbations' overhead and jitter, and the topology's
// latencies: zero for the nccl model's topology) has passed. On the wire it is a transfer
// of its wire time on the sender's way out and the receiver's way in (port_flows.hpp),
// sharing those ports' time with the other messages and the job's collectives on them
// (two sends from one GPU, two NICs' worth of traffic into one); it arrives the clock's
// latency after its last byte leaves the wire. The route still has to exist (a failed link
// reroutes or stops the run, as for the other models).
class ClockTransport final : public Transport, private PortFlows::Client {
 public:
  // `ports`: shared with the job's collectives (CollectiveStream::ports).
  ClockTransport(sim::Engine& engine, Topology topology, Perturbations perturbations,
                 std::shared_ptr<const MachineClock> clock, std::shared_ptr<PortFlows> ports);
  std::string name() const override { return "machine_clock"; }
  bool messages_interact() const override { return true; }

 protected:
  void transmit(std::span<const int> links, double bytes, int message) override;

 private:
  void transfer_done(std::uint64_t message) override;

  std::shared_ptr<const MachineClock> clock_;
  std::shared_ptr<PortFlows> ports_;
  std::vector<double> latency_;  // per message id in flight: the clock's latency after the wire
};

}  // namespace dtsim::net
