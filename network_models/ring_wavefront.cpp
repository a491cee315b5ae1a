#include "network_models/ring_wavefront.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/ring_recurrence.hpp"

namespace dtsim::net {

RingWavefront::RingWavefront(const Schedule& schedule, Transport& transport, Hooks& hooks)
    : schedule_(schedule), transport_(transport), hooks_(hooks), ranks_(schedule.ring.ranks), steps_(schedule.ring.steps) {
  if (!ring_waits_for_every_rank(schedule))
    throw std::logic_error("RingWavefront: not a ring whose ranks wait for every rank");
  const auto n = static_cast<std::size_t>(ranks_);
  const Topology& topology = transport_.topology();
  // A sender is coupled when a link of its route carries another sender's route too.
  std::vector<int> senders_on(topology.links().size(), 0);
  routes_.resize(n);
  for (int r = 0; r < ranks_; ++r) {
    routes_[static_cast<std::size_t>(r)] = &topology.route(r, next(r));
    for (int l : *routes_[static_cast<std::size_t>(r)]) ++senders_on[static_cast<std::size_t>(l)];
  }
  coupled_.assign(n, 0);
  for (std::size_t r = 0; r < n; ++r) {
    for (int l : *routes_[r])
      if (senders_on[static_cast<std::size_t>(l)] > 1) coupled_[r] = 1;
    coupled_count_ += coupled_[r];
  }
  path_.reserve(n);
  for (int r = 0; r < ranks_; ++r) path_.push_back(transport_.alone_path(r, next(r)));

  const sim::TimeGrid& grid = transport_.engine().time_grid();
  double bottleneck = -1.0;
  quantized_ = grid.on();
  for (std::size_t r = 0; r < n && quantized_; ++r) {
    if (coupled_[r]) continue;
    if (path_[r].to_self || (bottleneck >= 0.0 && path_[r].bottleneck != bottleneck)) quantized_ = false;
    bottleneck = path_[r].bottleneck;
  }
  if (quantized_ && bottleneck > 0.0) {
    horizon_ = grid.horizon();
    delay_q_.resize(n);
    for (std::size_t r = 0; r < n; ++r) delay_q_[r] = grid.quantize(path_[r].delay);
    for (double bytes : schedule_.ring.chunk) transfer_q_.push_back(grid.quantize(bytes / bottleneck));
  } else {
    quantized_ = false;
  }

  rank_ = std::vector<RankState>(n);
  for (std::size_t r = 0; r < n; ++r) rank_[r].coupled = coupled_[r] != 0;
  if (coupled_count_ == 0) arrival_.assign(n, 0.0);
}

double RingWavefront::first_transfer_start(int rank, double t) const {
  return transport_.engine().time_grid().later(t, path_[static_cast<std::size_t>(rank)].delay);
}

bool RingWavefront::alone_delays_positive() const {
  for (std::size_t r = 0; r < path_.size(); ++r)
    if (!coupled_[r] && !(path_[r].delay > 0.0)) return false;
  return true;
}

// On the grid below its horizon later(t, d) is t + quantize(d), so (t + delay) +
// transfer with both rounded beforehand is alone_arrival's sum; the times are all on the
// grid (arrivals checked, the rest sums of them), so no sum rounds and there is no tie to
// count. Elsewhere, alone_arrival itself.
inline double RingWavefront::alone_arrival(int r, int step, double t) {
  const int chunk = schedule_.ring_chunk(r, static_cast<std::size_t>(step));
  if (quantized_ && t < horizon_) {
    const double start = t + delay_q_[static_cast<std::size_t>(r)];
    if (start < horizon_) return start + transfer_q_[static_cast<std::size_t>(chunk)];
  }
  return transport_.alone_arrival(path_[static_cast<std::size_t>(r)], t, schedule_.ring.chunk[static_cast<std::size_t>(chunk)]);
}

void RingWavefront::arrive(int rank, double now) {
  RankState& st = rank_.at(static_cast<std::size_t>(rank));
  if (st.step >= 0) throw std::logic_error(fmt::format("{}: rank {} arrived twice in one collective", schedule_.name, rank));
  if (!transport_.engine().time_grid().on_grid(now)) quantized_ = false;
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
