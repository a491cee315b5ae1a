#include "network_models/ring_recurrence.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

namespace dtsim::net {

namespace {

// The chunk rank 0 sends in step k (rank r sends the one r places on, mod n), as
// Schedule::ring_send numbers them.
int first_chunk(const Schedule::Ring& ring, int k) {
  const int n = ring.ranks;
  const int index = k < ring.shift_from ? -k : 1 - (k - ring.shift_from);
  return ((index % n) + n) % n;
}

// One step: a[r] = arrival of rank r's message sent at t[r], by `arrive(r, chunk, t)`.
template <typename Arrive>
void send_step(const Schedule::Ring& ring, int k, std::span<const double> t, std::vector<double>& a, Arrive&& arrive) {
  const int n = ring.ranks;
  int chunk = first_chunk(ring, k);
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

std::vector<double> ring_done_times(const Schedule& schedule, std::span<const double> arrival, Transport& transport,
                                    std::vector<double>* last_arrival) {
  if (!ring_waits_for_every_rank(schedule))
    throw std::logic_error("ring_done_times: not a ring whose ranks wait for every rank");
  const Schedule::Ring& ring = schedule.ring;
  const int n = ring.ranks;
  const auto size = static_cast<std::size_t>(n);
  std::vector<Transport::AlonePath> path;
  path.reserve(size);
  for (int r = 0; r < n; ++r) path.push_back(transport.alone_path(r, r + 1 == n ? 0 : r + 1));

  std::vector<double> t(arrival.begin(), arrival.end()), a(size);
  const sim::TimeGrid& grid = transport.engine().time_grid();
  const bool one_bottleneck = std::all_of(path.begin(), path.end(), [&](const auto& p) {
    return !p.to_self && p.bottleneck == path.front().bottleneck;
  });
  const bool on_grid = std::all_of(arrival.begin(), arrival.end(), [&](double x) { return grid.on_grid(x); });
  if (grid.on() && one_bottleneck && on_grid) {
    // Below the horizon later(t, d) is t + quantize(d): the roundings once per sender's
    // delay and per chunk, the additions as the transport makes them (exact on the
    // grid: no ties to count). Valid if every time stayed below the horizon, which the
    // largest done time tells (times only grow).
    std::vector<double> delay(size), transfer(size);
    for (std::size_t r = 0; r < size; ++r) delay[r] = grid.quantize(path[r].delay);
    for (std::size_t i = 0; i < size; ++i) transfer[i] = grid.quantize(ring.chunk[i] / path.front().bottleneck);
    for (int k = 0; k < ring.steps; ++k) {
      send_step(ring, k, t, a, [&](int r, int chunk, double sent) {
        return (sent + delay[static_cast<std::size_t>(r)]) + transfer[static_cast<std::size_t>(chunk)];
      });
      receive_step(a, t);
    }
    if (*std::max_element(t.begin(), t.end()) < grid.horizon()) {
      if (last_arrival) *last_arrival = a;
      return t;
    }
    t.assign(arrival.begin(), arrival.end());  // past the horizon: message by message
  }
  for (int k = 0; k < ring.steps; ++k) {
    send_step(ring, k, t, a, [&](int r, int chunk, double sent) {
      return transport.alone_arrival(path[static_cast<std::size_t>(r)], sent, ring.chunk[static_cast<std::size_t>(chunk)]);
    });
    receive_step(a, t);
  }
  if (last_arrival) *last_arrival = a;
  return t;
}

}  // namespace dtsim::net
