// net::ExactShortcuts: what the executor's exact shortcuts read and set on a transport,
// apart from its message path (transport.hpp: send, transmit, deliver).
//
// The shortcuts (collective_execution.hpp) compute a collective's times without sending
// its messages, or replay them from a record, and are exact only while nothing else
// shares the network. So the transport keeps, for them:
// - traffic counts: messages sent and links claimed, in all and before the current
//   instant (collective reuse compares them across a window);
// - rounding ties: times computed since count_rounding_ties() that fell exactly halfway
//   between two doubles (a window with none shifts exactly by any number of its binade's
//   steps, one with any by an even number only);
// - the replay guard: while a replayed collective is done, a message sent would have
//   shared the network with it, so the send forbids its shape and throws ReuseConflict;
// - ring evaluation: whether rings may be computed from their recurrence, as the network
//   model's entry allows (network_model.hpp);
// - link holds (link_holds.hpp) for rings computed on the flow model;
// - a message's alone path: what it costs sent with nothing else in flight, computed with
//   the very additions the transport's delivery makes.
// The transport owns one (Transport::shortcuts()) and calls its hooks as messages are
// sent and transferred; a model that allows no shortcut never reads it.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "network_models/link_holds.hpp"
#include "sim/engine.hpp"

namespace dtsim::net {

class CollectiveReuse;
class Transport;

class ExactShortcuts {
 public:
  ExactShortcuts(Transport& transport, const sim::Engine& engine) : transport_(transport), engine_(engine) {}
  ExactShortcuts(const ExactShortcuts&) = delete;
  ExactShortcuts& operator=(const ExactShortcuts&) = delete;

  // Messages sent and links claimed: in all, and before the current simulated instant.
  std::uint64_t traffic() const { return traffic_; }
  std::uint64_t traffic_before_now() const {
    return last_traffic_instant_ == engine_.now() ? traffic_before_instant_ : traffic_;
  }

  // Rounding ties counted since count_rounding_ties(). Counting costs an exact error term
  // per computed time, so it is off until collective reuse asks for it, before the first
  // collective it watches starts.
  std::uint64_t rounding_ties() const { return rounding_ties_; }
  void count_rounding_ties() { count_ties_ = true; }

  // Until the replayed collective of `shape` is done: a message sent before `until` (or
  // at `until` when `inclusive`) forbids the shape in `reuse` and throws ReuseConflict.
  // Cleared by end_replay_guard().
  void guard_replay(const void* owner, CollectiveReuse& reuse, std::string shape, double until, bool inclusive);
  void end_replay_guard(const void* owner) {
    if (guard_owner_ == owner) guard_ = false;
  }
  // Whether a replayed collective holds the network now.
  bool replay_guarded() const {
    return guard_ && (engine_.now() < guard_until_ || (guard_inclusive_ && engine_.now() == guard_until_));
  }

  // Whether the executor may compute ring collectives from their recurrence: set by
  // whoever makes the transport for a model, from NetworkConfig::evaluate_rings and the
  // model entry's rings_as_recurrence.
  void evaluate_rings(bool on) { evaluate_rings_ = on; }
  bool evaluates_rings() const { return evaluate_rings_; }

  // Link holds for rings computed on the flow model: claimed at a ring's first arrival
  // if none of the links carries a flow or is claimed by another ring (a claim counts as
  // traffic).
  int new_holder(const std::string& shape, CollectiveReuse* restarts) { return holds_.new_holder(shape, restarts); }
  bool claim_links(int holder, std::span<const int> links);
  void take_links(int holder, std::span<const int> links, double first_use) { holds_.take(holder, links, first_use); }
  void free_links_after(int holder, std::span<const int> links, double t) { holds_.free_after(holder, links, t); }
  void release_links(int holder, std::span<const int> links) { holds_.release(holder, links); }
  // Whether a link is held or claimed now (an evaluated ring is running).
  bool holds_live() const { return holds_.live(engine_.now()); }

  // What a message sent alone costs, for a ring's recurrence (ring_recurrence.hpp): the
  // route's fixed part, looked up once per sender; alone_arrival() then makes the very
  // additions send() and the uncontended transfer make, so its time is the delivery's to
  // the last bit.
  struct AlonePath {
    double delay = 0.0;       // overhead + the route's latency
    double bottleneck = 0.0;  // the route's smallest bandwidth now
    bool to_self = false;     // delivered after the delay, no transfer
  };
  AlonePath alone_path(int src, int dst) const;
  double alone_arrival(const AlonePath& path, double t, double bytes) const;

  // The transport's hooks.
  // A message is sent now: the replay guard's check, then it counts as traffic.
  void on_send() {
    if (guard_) check_replay_guard();
    count_traffic();
  }
  // A transfer starts on `links` now: a conflict if one is held.
  void on_transfer(std::span<const int> links) { holds_.check(links, engine_.now()); }
  // The transport computed `sum` = t + d: counts it when it was a tie.
  void on_sum(double t, double d, double sum) {
    if (!count_ties_) return;
    // Fast2Sum (the larger operand first): the rounding error of the sum, exactly.
    const double error = std::min(t, d) - (sum - std::max(t, d));
    if (error != 0.0 && is_half_step(sum, error)) ++rounding_ties_;
  }

 private:
  // Whether |error| is half the spacing of doubles at `sum` (positive): the exact sum
  // lay halfway between two of them. A sum rounded up onto a power of two came from the
  // binade below, whose spacing is half.
  static bool is_half_step(double sum, double error) {
    const double binade_start = std::bit_cast<double>(std::bit_cast<std::uint64_t>(sum) & 0x7ff0000000000000u);
    const double half_step = binade_start * 0x1p-53, e = std::abs(error);
    return e == half_step || (e == half_step * 0.5 && sum == binade_start);
  }
  void count_traffic() {
    if (engine_.now() != last_traffic_instant_) {
      last_traffic_instant_ = engine_.now();
      traffic_before_instant_ = traffic_;
    }
    ++traffic_;
  }
  void check_replay_guard();

  Transport& transport_;
  const sim::Engine& engine_;
  std::uint64_t rounding_ties_ = 0;
  bool count_ties_ = false;
  std::uint64_t traffic_ = 0;                 // messages sent and links claimed
  double last_traffic_instant_ = -1.0;        // the time of the last of them
  std::uint64_t traffic_before_instant_ = 0;  // traffic_ before that instant
  bool evaluate_rings_ = true;
  bool guard_ = false;
  const void* guard_owner_ = nullptr;
  double guard_until_ = 0.0;
  bool guard_inclusive_ = false;
  CollectiveReuse* guard_reuse_ = nullptr;
  std::string guard_shape_;
  LinkHolds holds_;
};

}  // namespace dtsim::net
