// net::RingWavefront: a ring collective on the flow model, computed from its recurrence
// where its messages are alone and simulated where they share links.
//
// ring_recurrence.hpp computes a compact ring from T[k+1][r] = max(a[k][r], a[k][r-1])
// on the uncontended model, where a message's arrival a is a function of its send
// time. On the flow model the same holds for a message alone on its links from its
// first byte to its last: it gets its route's bottleneck bandwidth throughout, and the
// flow model's additions for it (FlowTransport::give_alone_rate) are alone_arrival's.
// A sender is *alone* when its route shares no link with another sender's of the ring:
// it sends one message at a time (step k + 1 waits for its own step-k message to
// arrive, and the next transfer starts a positive delay later), so nothing of the ring
// meets its messages, and the links it would use are held for it (Transport's link
// holds: whatever else would start on one meanwhile is a conflict, and the run restarts
// with this ring simulated). The other senders are *coupled*: on a torus, the two whose
// row-wrapping routes share a link. They send real messages, which the transport
// simulates with every interaction.
//
// So the ring runs as events only at its coupled senders (with none, as on a ring or a
// star, nothing happens before the last arrival, and then ring_done_times sweeps it step
// by step). Each rank's arrivals queue
// for its successor, and a rank advances as soon as its inputs are known: its own
// message's arrival (computed when alone, delivered when coupled) and its predecessor's
// of the same step. Every time computed is at or after the instant it becomes known (a
// message arrives after it is sent, a rank is done after its last receive), so each
// coupled send and each rank's done is scheduled at or after now. Exact: the alone
// arrivals are alone_arrival's additions (on the time grid, below its horizon, the
// roundings taken once per path and chunk, as ring_done_times takes them), the coupled
// ones the transport's own, so the times equal the message-by-message simulation's bit
// for bit (tests/ring_recurrence_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "network_models/ring_recurrence.hpp"
#include "network_models/schedule.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {

// Per sender of a ring over all of `topology`'s ranks (rank r sends to r + 1): whether
// its route shares a link with another sender's (coupled: simulated on the flow model).
std::vector<char> coupled_ring_senders(const Topology& topology);

class RingWavefront {
 public:
  // What the collective does with the times as they become known.
  class Hooks {
   public:
    virtual ~Hooks() = default;
    // Coupled rank `rank` sends its message of step `step` at `at` (>= now).
    virtual void send_at(int rank, int step, double at) = 0;
    // Rank `rank` is done at `at` (>= now).
    virtual void done_at(int rank, double at) = 0;
    // Alone rank `rank`'s last message arrives at `at`: its links are free after it.
    virtual void links_free_after(int rank, double at) = 0;
  };

  // `schedule` must satisfy ring_waits_for_every_rank; the transport's network must not
  // change while the ring runs (no bandwidth change or failure ahead).
  RingWavefront(const Schedule& schedule, Transport& transport, Hooks& hooks);
  RingWavefront(const RingWavefront&) = delete;
  RingWavefront& operator=(const RingWavefront&) = delete;

  bool coupled(int rank) const { return coupled_[static_cast<std::size_t>(rank)] != 0; }
  int coupled_count() const { return coupled_count_; }
  // An alone rank's route to its successor, and the time its first transfer starts if
  // it arrives at `t`.
  std::span<const int> route(int rank) const { return *routes_[static_cast<std::size_t>(rank)]; }
  double first_transfer_start(int rank, double t) const;
  // Whether every alone sender's transfers start a positive delay after its sends (its
  // own messages then never touch on its links).
  bool alone_delays_positive() const;

  // Rank `rank` enters at `now` (each rank once: throws std::logic_error naming it if
  // twice). A coupled rank's first message is sent at once (Hooks::send_at).
  void arrive(int rank, double now);
  // Coupled rank `rank`'s message of its current step arrived at `now`.
  void coupled_arrived(int rank, double now);

 private:
  // One cache line per rank: all that advancing it reads and writes, but its
  // predecessor's line (hot: just advanced). Its queue holds the arrivals its successor
  // has not consumed yet: the first kInline in place (a rank rarely runs more than a
  // step or two ahead of its successor), the rest, behind a late rank, in `more`.
  struct alignas(64) RankState {
    static constexpr int kInline = 4;  // a power of two
    int step = -1;  // its current step; -1 before it arrives
    std::uint8_t head = 0, count = 0;
    bool coupled = false;
    double own = std::numeric_limits<double>::quiet_NaN();  // its current message's arrival (NaN: in flight)
    double items[kInline] = {};
    std::unique_ptr<std::deque<double>> more;
    bool empty() const { return count == 0; }
    void push(double t) {
      if (count < kInline && !(more && !more->empty())) {
        items[(head + count) & (kInline - 1)] = t;
        ++count;
        return;
      }
      if (!more) more = std::make_unique<std::deque<double>>();
      more->push_back(t);
    }
    double pop() {
      const double t = items[head];
      head = (head + 1) & (kInline - 1);
      --count;
      if (more && !more->empty()) {  // refill in order: `more` only fills while the ring is full
        items[(head + count) & (kInline - 1)] = more->front();
        more->pop_front();
        ++count;
      }
      return t;
    }
  };
  int next(int r) const { return r + 1 == ranks_ ? 0 : r + 1; }
  int prev(int r) const { return r == 0 ? ranks_ - 1 : r - 1; }
  // Rank r sends at `t` in step `step`, alone: when its message arrives.
  double alone_arrival(int r, int step, double t) {
    return alone_(r, schedule_.ring_chunk(r, static_cast<std::size_t>(step)), t);
  }
  // Advances rank r as far as its inputs allow; true if it took a step.
  bool advance(int r);
  // Rank r has a new output: it and its successors advance while they can.
  void propagate(int r);
  // No coupled sender: nothing happens before the last arrival, and then the whole ring
  // is ring_done_times' step-by-step sweep (a few nanoseconds a message, where advancing
  // rank by rank around the ring costs more).
  void sweep();
  int arrived_ = 0;

  const Schedule& schedule_;
  Transport& transport_;
  Hooks& hooks_;
  int ranks_, steps_;
  std::vector<const std::vector<int>*> routes_;  // per sender, to its successor
  std::vector<char> coupled_;
  int coupled_count_ = 0;
  AloneArrivals alone_;  // the alone senders' messages
  std::vector<RankState> rank_;
  std::vector<double> arrival_;  // per rank, for the sweep (no coupled sender)
};

}  // namespace dtsim::net
