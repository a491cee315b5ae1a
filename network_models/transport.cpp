#include "network_models/transport.hpp"

#include <algorithm>
#include <limits>
#include <queue>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net {

Transport::Transport(sim::Engine& engine, Topology topology, Perturbations perturbations)
    : engine_(engine), topology_(std::move(topology)), perturbations_(std::move(perturbations)),
      jitter_rng_(perturbations_.jitter_seed) {
  for (const auto& link : topology_.links()) bandwidth_.push_back(link.params.bandwidth_bytes_per_s);
  for (const auto& change : perturbations_.bandwidth_trace) {
    if (!(change.bandwidth_bytes_per_s > 0))
      throw std::invalid_argument(fmt::format("bandwidth trace: link {}-{} needs bandwidth > 0", change.a, change.b));
    engine_.call_at(change.time_s, [this, change] {
      bool found = false;
      for (std::size_t l = 0; l < topology_.links().size(); ++l) {
        const auto& link = topology_.links()[l];
        if ((link.src == change.a && link.dst == change.b) || (link.src == change.b && link.dst == change.a)) {
          bandwidth_[l] = change.bandwidth_bytes_per_s;
          found = true;
        }
      }
      if (!found) throw std::invalid_argument(fmt::format("bandwidth trace: no link {}-{}", change.a, change.b));
      on_bandwidth_change();
    });
  }
  for (const auto& failure : perturbations_.failures)
    engine_.call_at(failure.time_s, [this, failure] {
      topology_.fail_link(failure.a, failure.b);
      on_link_failure();
    });
}

void Transport::send(int src, int dst, double bytes, std::function<void()> arrived) {
  ++messages_;
  bytes_ += bytes;
  double delay = perturbations_.overhead_s + topology_.route_latency(src, dst);
  if (perturbations_.jitter_s > 0)
    delay += std::uniform_real_distribution<double>(0.0, perturbations_.jitter_s)(jitter_rng_);
  if (src == dst) {
    engine_.call_at(engine_.now() + delay, std::move(arrived));
    return;
  }
  // The route is taken when the bytes start to flow, so a failure during the latency
  // phase is already avoided.
  engine_.call_at(engine_.now() + delay, [this, src, dst, bytes, arrived = std::move(arrived)]() mutable {
    transmit(topology_.route(src, dst), bytes, std::move(arrived));
  });
}

void UncontendedTransport::transmit(const std::vector<int>& route, double bytes, std::function<void()> arrived) {
  double bottleneck = std::numeric_limits<double>::infinity();
  for (int l : route) bottleneck = std::min(bottleneck, link_bandwidth(l));
  const double duration = route.empty() ? 0.0 : bytes / bottleneck;
  engine_.call_at(engine_.now() + duration, std::move(arrived));
}

FlowTransport::FlowTransport(sim::Engine& engine, Topology topology, Perturbations perturbations)
    : Transport(engine, std::move(topology), std::move(perturbations)) {}

void FlowTransport::transmit(const std::vector<int>& route, double bytes, std::function<void()> arrived) {
  if (bytes <= 0.0 || route.empty()) {
    engine_.call_at(engine_.now(), std::move(arrived));
    return;
  }
  advance_to_now();
  auto flow = std::make_unique<Flow>();
  flow->route = route;
  flow->remaining = bytes;
  flow->updated_at = engine_.now();
  flow->arrived = std::move(arrived);
  flow->src = topology_.links()[route.front()].src;
  flow->dst = topology_.links()[route.back()].dst;
  active_.push_back(std::move(flow));
  request_solve();
}

void FlowTransport::on_link_failure() {
  advance_to_now();
  for (auto& f : active_) f->route = topology_.route(f->src, f->dst);
  request_solve();
}

// Flows that start at the same instant are solved together: the solve runs as an event
// at the current time, after the events already queued for it.
void FlowTransport::request_solve() {
  if (solve_pending_) return;
  solve_pending_ = true;
  engine_.call_at(engine_.now(), [this] {
    solve_pending_ = false;
    solve();
  });
}

void FlowTransport::advance_to_now() {
  const double now = engine_.now();
  for (auto& f : active_) {
    f->remaining = std::max(0.0, f->remaining - f->rate * (now - f->updated_at));
    f->updated_at = now;
  }
}

// Max-min fairness by progressive filling: repeatedly take the link whose remaining
// capacity divided by its unfrozen flows is smallest, give each of those flows that
// share, and remove them from every link they cross.
void FlowTransport::solve() {
  ++solves_;
  advance_to_now();
  const auto& links = topology_.links();
  std::vector<double> capacity(links.size());
  std::vector<int> unfrozen(links.size(), 0);
  std::vector<std::vector<int>> flows_on(links.size());
  std::vector<int> touched;
  for (std::size_t i = 0; i < active_.size(); ++i)
    for (int l : active_[i]->route) {
      if (unfrozen[l] == 0) {
        touched.push_back(l);
        capacity[l] = link_bandwidth(l);
      }
      ++unfrozen[l];
      flows_on[l].push_back(static_cast<int>(i));
    }
  using Entry = std::pair<double, int>;  // (fair share, link), smallest first; ties by link id
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (int l : touched) heap.push({capacity[l] / unfrozen[l], l});
  std::vector<bool> frozen(active_.size(), false);
  while (!heap.empty()) {
    auto [share, l] = heap.top();
    heap.pop();
    if (unfrozen[l] == 0 || share != capacity[l] / unfrozen[l]) continue;  // stale entry
    for (int i : flows_on[l]) {
      if (frozen[i]) continue;
      frozen[i] = true;
      active_[i]->rate = share;
      for (int m : active_[i]->route) {
        capacity[m] = std::max(0.0, capacity[m] - share);
        if (--unfrozen[m] > 0 && m != l) heap.push({capacity[m] / unfrozen[m], m});
      }
    }
  }
  // Completion times, and one event for the earliest of them.
  const double now = engine_.now();
  double next = std::numeric_limits<double>::infinity();
  for (auto& f : active_) {
    f->finish_at = f->rate > 0 ? now + f->remaining / f->rate : std::numeric_limits<double>::infinity();
    next = std::min(next, f->finish_at);
  }
  const auto generation = ++generation_;
  if (next < std::numeric_limits<double>::infinity())
    engine_.call_at(next, [this, generation] {
      if (generation == generation_) complete_due();
    });
}

void FlowTransport::complete_due() {
  const double now = engine_.now();
  std::vector<std::function<void()>> done;
  // Flows whose completion time has come leave in the order they were started.
  auto keep = std::stable_partition(active_.begin(), active_.end(),
                                    [now](const std::unique_ptr<Flow>& f) { return f->finish_at > now; });
  for (auto it = keep; it != active_.end(); ++it) done.push_back(std::move((*it)->arrived));
  active_.erase(keep, active_.end());
  // Messages sent by these callbacks at this instant join the same solve.
  for (auto& arrived : done) arrived();
  request_solve();
}

std::unique_ptr<Transport> make_transport(const std::string& model, sim::Engine& engine, Topology topology,
                                          Perturbations perturbations) {
  if (model == "alpha_beta") return std::make_unique<UncontendedTransport>(engine, std::move(topology), std::move(perturbations));
  if (model == "flow") return std::make_unique<FlowTransport>(engine, std::move(topology), std::move(perturbations));
  throw std::invalid_argument(fmt::format("unknown transport model \"{}\" (expected alpha_beta or flow)", model));
}

}  // namespace dtsim::net
