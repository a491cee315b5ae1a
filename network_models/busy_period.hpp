// net::BusyPeriod: collectives that overlapped on the network, recorded and replayed as one.
//
// A collective whose ranks finish at different instants (a ring all-reduce on a torus,
// whose hops between rows cross two links) lets its first ranks start the next
// collective while its last messages are still in flight; so none of a step's
// collectives runs alone, and none can be reused by itself (collective_reuse.hpp). The
// unit of reuse is then the busy period: from a collective that starts on an idle
// network (its head) until the network is idle again, every collective that started in
// between (its members) and nothing else on the network. Idle counts from the instant in
// which the last messages in flight are delivered: a collective that starts then (a
// rank done with the last member enters the next partition at once) heads a period of
// its own, and the one before ends there.
//
// Recorded: each member's shape, each rank's arrival and done times relative to the
// head's first arrival, and when the period ended. Keyed by the head's key (shape,
// perturbation epoch, shift domain and last bit, relative arrivals), like a single
// collective's record.
//
// Replayed: at the head's last arrival, as a single record is. Its messages are
// cancelled, its ranks finish at the recorded times; each later collective that starts
// inside the period must be the next member (the same shape) and each of its ranks must
// arrive at exactly the recorded time: then it sends nothing and finishes its ranks at
// the recorded times too. Why that is exact: the network state at every instant of the
// period is a function of the members' shapes and arrival times only (nothing else is on
// it), and the shift argument of collective_reuse.hpp makes the shifted period compute
// the recorded offsets. Anything else (another shape, an arrival at another time, a
// message of anyone else before the end, a member that never comes) is a ReuseConflict:
// the head's shape is forbidden and the run starts again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::net {

struct PeriodMember {
  std::string shape;
  std::vector<double> arrival;  // per rank, relative to the head's first arrival
  std::vector<double> done;     // per rank, relative to the head's first arrival
  std::vector<int> order;       // ranks in the order they were done
};

struct PeriodRecord {
  std::vector<PeriodMember> members;  // in the order of their first arrivals; [0] is the head
  double end = 0.0;                   // the network idle again, relative to the head's first arrival
};

// The period being recorded (one per attempt at a time). Its members hold it; a period
// that something else touched stops recording and is dropped when they are done.
struct OpenPeriod {
  double first_arrival = 0.0;
  int shift_domain = 0;
  int last_bit = 0;
  std::uint64_t ties_before = 0;  // the transport's rounding ties before the head's first arrival
  std::uint64_t perturbation_epoch = 0;
  std::uint64_t sends_before = 0;  // the transport's shortcuts().traffic() before the head's first arrival
  std::uint64_t member_sends = 0;  // the members' traffic since (their messages, their link claims)
  int open_members = 0;            // members not yet done or with messages in flight
  bool recording = true;
  PeriodRecord record;
};

// The period being replayed: which member comes next, how many members are still
// arriving, and when the replay ends.
struct PeriodReplay {
  const PeriodRecord* record = nullptr;
  std::string head_shape;
  double first_arrival = 0.0;
  double end = 0.0;  // absolute
  std::size_t next = 1;
  int arriving = 0;  // members started whose ranks have not all arrived
  bool complete() const { return next == record->members.size() && arriving == 0; }
};

}  // namespace dtsim::net
