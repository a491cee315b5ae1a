// net::ring_done_times: a ring collective's times from its recurrence, without messages.
//
// On a transport whose messages never interact (the uncontended model, "alpha_beta"), a
// message's arrival is a function of its send time alone, so a compact ring schedule
// (schedule.hpp: in step k rank r sends one chunk to r + 1 and receives one from r - 1)
// is a recurrence over its steps. Rank r starts step k + 1 when both of step k's
// messages, its own send and its receive, have arrived:
//
//   T[0][r]     = arrival of rank r in the collective
//   a[k][r]     = arrival of the message r sends at T[k][r] (Transport::alone_arrival)
//   T[k + 1][r] = max(a[k][r], a[k][r - 1])
//   done[r]     = T[steps][r]
//
// which ScheduledExecution's event simulation computes message by message, with two
// events and a dozen calls per message where this is two additions and a max. Exact:
// the same additions on the same times (Transport::alone_arrival), so the same results
// bit for bit; on the engine's time grid, below its horizon, a message's arrival is
// t + (rounded delay) + (rounded transfer), with the roundings computed once per path
// and chunk instead of once per message (every operand the simulation's own).
#pragma once

#include <span>
#include <vector>

#include "network_models/schedule.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {

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
