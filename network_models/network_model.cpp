#include "network_models/network_model.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net {

namespace {

void check_arrivals(std::span<const double> arrival, int n, const char* op) {
  if (static_cast<int>(arrival.size()) != n)
    throw std::invalid_argument(fmt::format("{}: {} arrival times for {} ranks", op, arrival.size(), n));
}

// Ring schedule shared by all-reduce and all-gather: `steps` rounds in which every rank
// r sends `bytes_of(r, s)` to r+1.
template <typename BytesOf>
std::vector<double> ring_schedule(const NetworkModel& model, std::span<const double> arrival, int steps,
                                  BytesOf bytes_of) {
  const int n = model.size();
  std::vector<double> link_free(arrival.begin(), arrival.end());  // sender's previous send done
  std::vector<double> has_data(arrival.begin(), arrival.end());   // data for the next send held
  std::vector<double> received(n);
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < n; ++r) {
      const int next = (r + 1) % n;
      const double start = std::max(link_free[r], has_data[r]);
      const double done = start + model.p2p_time(r, next, bytes_of(r, s));
      link_free[r] = done;
      received[next] = done;
    }
    // What a rank received in step s is what it sends (or reduces and sends) in s + 1;
    // it also must have entered the collective itself.
    for (int r = 0; r < n; ++r) has_data[r] = std::max(received[r], arrival[r]);
  }
  std::vector<double> finish(n);
  for (int r = 0; r < n; ++r) finish[r] = std::max(link_free[r], has_data[r]);
  return finish;
}

}  // namespace

std::vector<double> NetworkModel::all_reduce(std::span<const double> arrival, double bytes) const {
  const int n = size();
  check_arrivals(arrival, n, "all_reduce");
  if (n == 1) return {arrival.begin(), arrival.end()};
  const double chunk = bytes / n;
  return ring_schedule(*this, arrival, 2 * (n - 1), [chunk](int, int) { return chunk; });
}

std::vector<double> NetworkModel::all_gather(std::span<const double> arrival,
                                             std::span<const double> block_bytes) const {
  const int n = size();
  check_arrivals(arrival, n, "all_gather");
  if (static_cast<int>(block_bytes.size()) != n)
    throw std::invalid_argument(fmt::format("all_gather: {} block sizes for {} ranks", block_bytes.size(), n));
  if (n == 1) return {arrival.begin(), arrival.end()};
  return ring_schedule(*this, arrival, n - 1,
                       [&](int r, int s) { return block_bytes[((r - s) % n + n) % n]; });
}

std::vector<double> NetworkModel::broadcast(std::span<const double> arrival, double bytes, int root) const {
  const int n = size();
  check_arrivals(arrival, n, "broadcast");
  if (root < 0 || root >= n) throw std::invalid_argument(fmt::format("broadcast: root {} of {} ranks", root, n));
  // Binomial tree over ranks relative to the root: in round k, relative rank v < 2^k
  // sends to v + 2^k.
  std::vector<double> has_data(n), link_free(n), finish(n);
  for (int v = 0; v < n; ++v) {
    const int r = (v + root) % n;
    has_data[v] = v == 0 ? arrival[r] : -1.0;
    link_free[v] = arrival[r];
  }
  for (int mask = 1; mask < n; mask <<= 1) {
    for (int v = 0; v < mask && v + mask < n; ++v) {
      const int src = (v + root) % n, dst = (v + mask + root) % n;
      const double start = std::max(link_free[v], has_data[v]);
      const double done = start + p2p_time(src, dst, bytes);
      link_free[v] = done;
      has_data[v + mask] = std::max(done, arrival[dst]);
    }
  }
  for (int v = 0; v < n; ++v) finish[(v + root) % n] = std::max(link_free[v], has_data[v]);
  return finish;
}

AlphaBetaModel::AlphaBetaModel(Topology topology, double alpha_s, double beta_bytes_per_s)
    : NetworkModel(std::move(topology)), alpha_(alpha_s), beta_(beta_bytes_per_s) {
  if (!(alpha_s >= 0.0)) throw std::invalid_argument(fmt::format("alpha_beta: latency must be >= 0, got {}", alpha_s));
  if (!(beta_bytes_per_s > 0.0))
    throw std::invalid_argument(fmt::format("alpha_beta: bandwidth must be > 0, got {}", beta_bytes_per_s));
}

double AlphaBetaModel::p2p_time(int src, int dst, double bytes) const {
  if (src == dst) return 0.0;
  return topology().hops(src, dst) * alpha_ + bytes / beta_;
}

}  // namespace dtsim::net
