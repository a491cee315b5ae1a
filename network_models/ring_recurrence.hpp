// net::ring_done_times: a ring collective's times from its recurrence, without messages.
//
// On a transport whose messages never interact (the uncontended model, "alpha_beta"), a
// message's arrival is a function of its send time alone, so a compact ring schedule
// (schedule.hpp: in step k rank r sends one chunk to r + 1 and receives one from r - 1)
// is a recurrence over its steps. Rank r starts step k + 1 when both of step k's
// messages, its own send and its receive, have arrived:
//
//   T[0][r]     = arrival of rank r in the collective
//   a[k][r]     = arrival of the message r sends at T[k][r] (ExactShortcuts::alone_arrival)
//   T[k + 1][r] = max(a[k][r], a[k][r - 1])
//   done[r]     = T[steps][r]
//
// which ScheduledExecution's event simulation computes message by message, with two
// events and a dozen calls per message where this is two additions and a max. Exact:
// the same additions on the same times (ExactShortcuts::alone_arrival), so the same results
// bit for bit; on the engine's time grid, below its horizon, a message's arrival is
// t + (rounded delay) + (rounded transfer), with the roundings computed once per path
// and chunk instead of once per message (every operand the simulation's own).
#pragma once

#include <span>
#include <vector>

#include "network_models/schedule.hpp"
#include "network_models/transport.hpp"
#include "sim/time_grid.hpp"

namespace dtsim::net {

// What a ring's senders' messages cost sent alone: ExactShortcuts::alone_arrival's additions,
// each sender's path looked up once. On the engine's time grid, below its horizon,
// later(t, d) is t + quantize(d), so where every sender counted has one bottleneck the
// roundings are made once per sender's delay and per chunk and a message costs two
// additions (exact for times on the grid: no sum rounds, no tie to count); at or past
// the horizon, or once a time off the grid came in, alone_arrival itself. Shared by
// ring_done_times and RingWavefront (ring_wavefront.hpp).
class AloneArrivals {
 public:
  // `skip[r]` (if given): sender r's messages are not computed, so its bottleneck does
  // not matter.
  AloneArrivals(const Schedule& schedule, Transport& transport, std::span<const char> skip = {});
  const ExactShortcuts::AlonePath& path(int r) const { return path_[static_cast<std::size_t>(r)]; }
  // A time that did not come from these sums (an arrival): off the grid, no shortcut.
  void note_time(double t) {
    if (quantized_ && !grid_.on_grid(t)) quantized_ = false;
  }
  // When the message rank r sends at `t`, of ring.chunk[chunk], arrives.
  double operator()(int r, int chunk, double t) {
    if (quantized_ && t < horizon_) {
      const double start = t + delay_[static_cast<std::size_t>(r)];
      if (start < horizon_) return start + transfer_[static_cast<std::size_t>(chunk)];
    }
    return transport_.shortcuts().alone_arrival(path_[static_cast<std::size_t>(r)], t, chunk_bytes_[static_cast<std::size_t>(chunk)]);
  }

 private:
  Transport& transport_;
  const sim::TimeGrid& grid_;
  const std::vector<double>& chunk_bytes_;
  std::vector<ExactShortcuts::AlonePath> path_;  // per sender, to its successor
  bool quantized_ = false;
  double horizon_ = 0.0;
  std::vector<double> delay_, transfer_;  // quantized: per sender, per chunk
};

// Whether `schedule` is a ring whose every rank is done only after every rank arrived
// (a compact ring over two or more ranks with at least ranks - 1 steps: all-reduce,
// reduce-scatter and all-gather), so that its recurrence can wait for the last arrival.
bool ring_waits_for_every_rank(const Schedule& schedule);

// The time each rank is done, the ranks having arrived at `arrival` (absolute times),
// the messages sent alone on `transport`'s current network; with `last_arrival`, each
// rank's last message's arrival too. Requires ring_waits_for_every_rank(schedule).
// Throws as sending would: no route between two neighbours names both.
std::vector<double> ring_done_times(const Schedule& schedule, std::span<const double> arrival, Transport& transport,
                                    std::vector<double>* last_arrival = nullptr);

}  // namespace dtsim::net
