#include "network_models/clock_transport.hpp"

namespace dtsim::net {

ClockTransport::ClockTransport(sim::Engine& engine, Topology topology, Perturbations perturbations,
                               std::shared_ptr<const MachineClock> clock)
    : Transport(engine, std::move(topology), std::move(perturbations)), clock_(std::move(clock)) {}

void ClockTransport::transmit(std::span<const int> /*links*/, double bytes, int message) {
  deliver_at(later(engine_.now(), clock_->message_seconds(message_src(message), message_dst(message), bytes)), message);
}

}  // namespace dtsim::net
