#include "network_models/exact_shortcuts.hpp"

#include "network_models/collective_reuse.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {

void ExactShortcuts::guard_replay(const void* owner, CollectiveReuse& reuse, std::string shape, double until,
                                  bool inclusive) {
  guard_ = true;
  guard_owner_ = owner;
  guard_reuse_ = &reuse;
  guard_shape_ = std::move(shape);
  guard_until_ = until;
  guard_inclusive_ = inclusive;
}

void ExactShortcuts::check_replay_guard() {
  const double now = engine_.now();
  if (now < guard_until_ || (guard_inclusive_ && now == guard_until_)) {
    guard_ = false;
    guard_reuse_->forbid(guard_shape_);
    guard_reuse_->forbid_evaluation(guard_shape_);  // computed, it would meet that traffic too
    throw ReuseConflict(guard_shape_);
  }
}

bool ExactShortcuts::claim_links(int holder, std::span<const int> links) {
  const Transport& t = transport_;
  if (!holds_.claim(holder, links, t.topology_.links().size(), [&t](int l) { return t.carries_flow(l); })) return false;
  count_traffic();
  return true;
}

ExactShortcuts::AlonePath ExactShortcuts::alone_path(int src, int dst) const {
  const Transport& t = transport_;
  const Topology::Route& route = t.topology_.route_info(src, dst);  // throws, naming both, without one
  return {.delay = t.fixed_delay(route.latency_s), .bottleneck = t.bottleneck(route.links), .to_self = src == dst};
}

}  // namespace dtsim::net
