#include "network_models/ring_recurrence.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

namespace dtsim::net {

namespace {

// One step: a[r] = arrival of rank r's message sent at t[r], by `arrive(r, chunk, t)`.
// Rank r sends the chunk r places after rank 0's.
template <typename Arrive>
void send_step(const Schedule& schedule, int k, std::span<const double> t, std::vector<double>& a, Arrive&& arrive) {
  const int n = schedule.ring.ranks;
  int chunk = schedule.ring_chunk(0, static_cast<std::size_t>(k));
  for (int r = 0; r < n; ++r) {
    a[static_cast<std::size_t>(r)] = arrive(r, chunk, t[static_cast<std::size_t>(r)]);
    if (++chunk == n) chunk = 0;
  }
}

// T[k + 1][r] = max(a[k][r], a[k][r - 1]).
void receive_step(std::span<const double> a, std::vector<double>& t) {
  const std::size_t n = a.size();
  t[0] = std::max(a[0], a[n - 1]);
  for (std::size_t r = 1; r < n; ++r) t[r] = std::max(a[r], a[r - 1]);
}

}  // namespace

bool ring_waits_for_every_rank(const Schedule& schedule) {
  return schedule.compact_ring() && schedule.ring.ranks >= 2 && schedule.ring.steps >= schedule.ring.ranks - 1 &&
         static_cast<int>(schedule.ring.chunk.size()) == schedule.ring.ranks;
}

AloneArrivals::AloneArrivals(const Schedule& schedule, Transport& transport, std::span<const char> skip)
    : transport_(transport), grid_(transport.engine().time_grid()), chunk_bytes_(schedule.ring.chunk) {
  const int n = schedule.ring.ranks;
  path_.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) path_.push_back(transport.shortcuts().alone_path(r, r + 1 == n ? 0 : r + 1));
  double bottleneck = -1.0;
  quantized_ = grid_.on();
  for (std::size_t r = 0; r < path_.size() && quantized_; ++r) {
    if (r < skip.size() && skip[r]) continue;
    if (path_[r].to_self || (bottleneck >= 0.0 && path_[r].bottleneck != bottleneck)) quantized_ = false;
    bottleneck = path_[r].bottleneck;
  }
  if (!quantized_ || !(bottleneck > 0.0)) {
    quantized_ = false;
    return;
  }
  horizon_ = grid_.horizon();
  for (const auto& p : path_) delay_.push_back(grid_.quantize(p.delay));
  for (double bytes : chunk_bytes_) transfer_.push_back(grid_.quantize(bytes / bottleneck));
}

std::vector<double> ring_done_times(const Schedule& schedule, std::span<const double> arrival, Transport& transport,
                                    std::vector<double>* last_arrival) {
  if (!ring_waits_for_every_rank(schedule))
    throw std::logic_error("ring_done_times: not a ring whose ranks wait for every rank");
  AloneArrivals alone(schedule, transport);
  for (double x : arrival) alone.note_time(x);
  std::vector<double> t(arrival.begin(), arrival.end()), a(t.size());
  for (int k = 0; k < schedule.ring.steps; ++k) {
    send_step(schedule, k, t, a, alone);
    receive_step(a, t);
  }
  if (last_arrival) *last_arrival = a;
  return t;
}

}  // namespace dtsim::net
