#include "network_models/ring_wavefront.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/ring_recurrence.hpp"

namespace dtsim::net {

namespace {

// Each of `ranks` senders' route to its successor.
std::vector<const std::vector<int>*> routes_to_successors(const Topology& topology, int ranks) {
  std::vector<const std::vector<int>*> routes;
  for (int r = 0; r < ranks; ++r) routes.push_back(&topology.route(r, r + 1 == ranks ? 0 : r + 1));
  return routes;
}

std::vector<const std::vector<int>*> ring_routes(const Schedule& schedule, const Topology& topology) {
  if (!ring_waits_for_every_rank(schedule))
    throw std::logic_error("RingWavefront: not a ring whose ranks wait for every rank");
  return routes_to_successors(topology, schedule.ring.ranks);
}

// A sender is coupled when a link of its route carries another sender's route too.
std::vector<char> coupled_senders(const std::vector<const std::vector<int>*>& routes, std::size_t links) {
  std::vector<int> senders_on(links, 0);
  for (const auto* route : routes)
    for (int l : *route) ++senders_on[static_cast<std::size_t>(l)];
  std::vector<char> coupled(routes.size(), 0);
  for (std::size_t r = 0; r < routes.size(); ++r)
    for (int l : *routes[r])
      if (senders_on[static_cast<std::size_t>(l)] > 1) coupled[r] = 1;
  return coupled;
}

}  // namespace

std::vector<char> coupled_ring_senders(const Topology& topology) {
  return coupled_senders(routes_to_successors(topology, topology.size()), topology.links().size());
}

RingWavefront::RingWavefront(const Schedule& schedule, Transport& transport, Hooks& hooks)
    : schedule_(schedule),
      transport_(transport),
      hooks_(hooks),
      ranks_(schedule.ring.ranks),
      steps_(schedule.ring.steps),
      routes_(ring_routes(schedule, transport.topology())),
      coupled_(coupled_senders(routes_, transport.topology().links().size())),
      coupled_count_(static_cast<int>(std::count(coupled_.begin(), coupled_.end(), 1))),
      alone_(schedule, transport, coupled_) {
  const auto n = static_cast<std::size_t>(ranks_);
  rank_ = std::vector<RankState>(n);
  for (std::size_t r = 0; r < n; ++r) rank_[r].coupled = coupled_[r] != 0;
  if (coupled_count_ == 0) arrival_.assign(n, 0.0);
}

double RingWavefront::first_transfer_start(int rank, double t) const {
  return transport_.engine().time_grid().later(t, alone_.path(rank).delay);
}

// Positive as the transport adds it: on the grid, at least a tick.
bool RingWavefront::alone_delays_positive() const {
  for (int r = 0; r < ranks_; ++r)
    if (!coupled(r) && !(first_transfer_start(r, 0.0) > 0.0)) return false;
  return true;
}

void RingWavefront::arrive(int rank, double now) {
  RankState& st = rank_.at(static_cast<std::size_t>(rank));
  if (st.step >= 0) throw std::logic_error(fmt::format("{}: rank {} arrived twice in one collective", schedule_.name, rank));
  alone_.note_time(now);
  st.step = 0;
  if (coupled_count_ == 0) {
    arrival_[static_cast<std::size_t>(rank)] = now;
    if (++arrived_ == ranks_) sweep();
    return;
  }
  if (st.coupled) {
    hooks_.send_at(rank, 0, now);
  } else {
    st.own = alone_arrival(rank, 0, now);
    st.push(st.own);
  }
  propagate(rank);
}

void RingWavefront::coupled_arrived(int rank, double now) {
  RankState& st = rank_[static_cast<std::size_t>(rank)];
  st.own = now;
  st.push(now);
  propagate(rank);
}

// T[k + 1][r] = max(a[k][r], a[k][r - 1]): its own message's arrival and the front of its
// predecessor's queue (the predecessor's step-k arrival: it pushes one per step).
bool RingWavefront::advance(int rank) {
  RankState& st = rank_[static_cast<std::size_t>(rank)];
  if (st.step < 0) return false;
  RankState& from = rank_[static_cast<std::size_t>(prev(rank))];
  bool moved = false;
  while (st.step < steps_ && !std::isnan(st.own) && !from.empty()) {
    const double t = std::max(st.own, from.pop());
    ++st.step;
    moved = true;
    if (st.step == steps_) {
      if (!st.coupled) hooks_.links_free_after(rank, st.own);
      st.own = std::numeric_limits<double>::quiet_NaN();
      hooks_.done_at(rank, t);
      break;
    }
    if (st.coupled) {
      st.own = std::numeric_limits<double>::quiet_NaN();
      hooks_.send_at(rank, st.step, t);
      break;
    }
    st.own = alone_arrival(rank, st.step, t);
    st.push(st.own);
  }
  return moved;
}

void RingWavefront::sweep() {
  std::vector<double> last;
  const std::vector<double> done = ring_done_times(schedule_, arrival_, transport_, &last);
  std::vector<int> order(done.size());
  for (std::size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return done[a] < done[b]; });
  for (int r = 0; r < ranks_; ++r) hooks_.links_free_after(r, last[static_cast<std::size_t>(r)]);
  for (int r : order) hooks_.done_at(r, done[static_cast<std::size_t>(r)]);
}

// A rank's new output is its successor's new input; a successor that advances has new
// output in turn. The chain stops at the first rank that cannot advance.
void RingWavefront::propagate(int rank) {
  advance(rank);
  for (int r = next(rank); advance(r); r = next(r)) {
  }
}

}  // namespace dtsim::net
