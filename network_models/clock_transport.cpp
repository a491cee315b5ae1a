#include "network_models/clock_transport.hpp"

#include <algorithm>
#include <stdexcept>

namespace dtsim::net {

ClockTransport::ClockTransport(sim::Engine& engine, Topology topology, Perturbations perturbations,
                               std::shared_ptr<const MachineClock> clock, std::shared_ptr<MachinePorts> ports)
    : Transport(engine, std::move(topology), std::move(perturbations)), clock_(std::move(clock)), ports_(std::move(ports)) {
  if (!ports_ || ports_->egress_free.size() != static_cast<std::size_t>(clock_->ports()))
    throw std::invalid_argument("ClockTransport: expected the clock's ports");
}

void ClockTransport::transmit(std::span<const int> /*links*/, double bytes, int message) {
  const MessageTiming t = clock_->message_timing(message_src(message), message_dst(message), bytes);
  double& out = ports_->egress_free.at(static_cast<std::size_t>(t.egress));
  double& in = ports_->ingress_free.at(static_cast<std::size_t>(t.ingress));
  const double start = std::max({engine_.now(), out, in});
  out = in = start + t.wire_s;
  deliver_at(later(start, t.wire_s + t.latency_s), message);
}

}  // namespace dtsim::net
