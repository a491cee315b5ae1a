// net::ClockTransport: the transport of the models of a described machine (the nccl
// model), each message timed by its MachineClock.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "network_models/machine_clock.hpp"
#include "network_models/machine_ports.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {

// Messages timed by a MachineClock: a message from src to dst goes on the wire once its
// route's fixed part (the perturbations' overhead and jitter, and the topology's
// latencies: zero for the nccl model's topology) has passed and both its ports are free:
// the sender's way out and the receiver's way in each carry one message at a time, in the
// order the messages reach them (two sends from one GPU, two NICs' worth of traffic into
// one, take turns), and none while a collective of the job runs (machine_ports.hpp). It
// arrives the clock's latency after its wire time. The route still has to exist (a failed
// link reroutes or stops the run, as for the other models).
class ClockTransport final : public Transport {
 public:
  // `ports`: shared with the job's collectives (CollectiveStream::ports).
  ClockTransport(sim::Engine& engine, Topology topology, Perturbations perturbations,
                 std::shared_ptr<const MachineClock> clock, std::shared_ptr<MachinePorts> ports);
  std::string name() const override { return "machine_clock"; }

 protected:
  void transmit(std::span<const int> links, double bytes, int message) override;

 private:
  std::shared_ptr<const MachineClock> clock_;
  std::shared_ptr<MachinePorts> ports_;
};

}  // namespace dtsim::net
