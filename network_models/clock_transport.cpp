#include "network_models/clock_transport.hpp"

#include <algorithm>

namespace dtsim::net {

ClockTransport::ClockTransport(sim::Engine& engine, Topology topology, Perturbations perturbations,
                               std::shared_ptr<const MachineClock> clock)
    : Transport(engine, std::move(topology), std::move(perturbations)),
      clock_(std::move(clock)),
      egress_free_(static_cast<std::size_t>(clock_->ports()), 0.0),
      ingress_free_(static_cast<std::size_t>(clock_->ports()), 0.0) {}

void ClockTransport::transmit(std::span<const int> /*links*/, double bytes, int message) {
  const MessageTiming t = clock_->message_timing(message_src(message), message_dst(message), bytes);
  double& out = egress_free_.at(static_cast<std::size_t>(t.egress));
  double& in = ingress_free_.at(static_cast<std::size_t>(t.ingress));
  const double start = std::max({engine_.now(), out, in});
  out = in = start + t.wire_s;
  deliver_at(later(start, t.wire_s + t.latency_s), message);
}

}  // namespace dtsim::net
