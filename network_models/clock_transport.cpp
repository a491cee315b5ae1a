#include "network_models/clock_transport.hpp"

#include <stdexcept>

namespace dtsim::net {

ClockTransport::ClockTransport(sim::Engine& engine, Topology topology, Perturbations perturbations,
                               std::shared_ptr<const MachineClock> clock, std::shared_ptr<PortFlows> ports)
    : Transport(engine, std::move(topology), std::move(perturbations)), clock_(std::move(clock)), ports_(std::move(ports)) {
  if (!ports_ || ports_->ports() != clock_->ports())
    throw std::invalid_argument("ClockTransport: expected the clock's ports");
}

void ClockTransport::transmit(std::span<const int> /*links*/, double bytes, int message) {
  const MessageTiming t = clock_->message_timing(message_src(message), message_dst(message), bytes);
  const auto id = static_cast<std::size_t>(message);
  if (latency_.size() <= id) latency_.resize(id + 1);
  latency_[id] = t.latency_s;
  ports_->start(t.wire_s, t.egress, t.ingress, *this, static_cast<std::uint64_t>(message), t.share);
}

void ClockTransport::transfer_done(std::uint64_t message) {
  const int m = static_cast<int>(message);
  deliver_at(later(engine_.now(), latency_[static_cast<std::size_t>(m)]), m);
}

}  // namespace dtsim::net
