#include "network_models/transport.hpp"

#include <algorithm>
#include <limits>
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
      before_link_failure();
      topology_.fail_link(failure.a, failure.b);
      on_link_failure();
    });
}

void Transport::send(int src, int dst, double bytes, std::function<void()> arrived) {
  ++messages_;
  bytes_ += bytes;
  if (trace_) {
    arrived = [this, src, dst, bytes, start = engine_.now(), inner = std::move(arrived)] {
      trace_->complete(trace_->track("network", fmt::format("{}->{}", src, dst)), "message", start, engine_.now(),
                       {{"bytes", bytes}});
      inner();
    };
  }
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
    : Transport(engine, std::move(topology), std::move(perturbations)) {
  const auto links = topology_.links().size();
  on_link_.resize(links);
  link_dirty_.assign(links, 0);
  capacity_.assign(links, 0.0);
  unfrozen_.assign(links, 0);
  link_seen_.assign(links, 0);
}

void FlowTransport::attach(int id) {
  for (int l : *flows_[id].route) {
    on_link_[l].push_back(id);
    mark_dirty(l);
  }
}

void FlowTransport::detach(int id) {
  for (int l : *flows_[id].route) {
    auto& list = on_link_[l];
    list.erase(std::find(list.begin(), list.end(), id));
    mark_dirty(l);
  }
}

void FlowTransport::mark_dirty(int link) {
  if (link_dirty_[link]) return;
  link_dirty_[link] = 1;
  dirty_links_.push_back(link);
}

void FlowTransport::transmit(const std::vector<int>& route, double bytes, std::function<void()> arrived) {
  if (bytes <= 0.0 || route.empty()) {
    engine_.call_at(engine_.now(), std::move(arrived));
    return;
  }
  int id;
  if (free_ids_.empty()) {
    id = static_cast<int>(flows_.size());
    flows_.emplace_back();
    start_order_.push_back(0);
    flow_seen_.push_back(0);
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
  }
  Flow& f = flows_[id];
  f.route = &route;
  f.remaining = bytes;
  f.rate = 0.0;
  f.updated_at = engine_.now();
  f.arrived = std::move(arrived);
  f.src = topology_.links()[route.front()].src;
  f.dst = topology_.links()[route.back()].dst;
  f.active = true;
  ++f.version;
  start_order_[id] = started_++;
  ++active_count_;
  attach(id);
  request_solve();
}

void FlowTransport::on_bandwidth_change() {
  for (std::size_t l = 0; l < on_link_.size(); ++l) mark_dirty(static_cast<int>(l));
  request_solve();
}

// Flows in flight keep the bytes they have moved and continue on their new routes.
void FlowTransport::before_link_failure() {
  const double now = engine_.now();
  for (std::size_t id = 0; id < flows_.size(); ++id) {
    Flow& f = flows_[id];
    if (!f.active) continue;
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.updated_at));
    f.updated_at = now;
    detach(static_cast<int>(id));
  }
}

void FlowTransport::on_link_failure() {
  for (std::size_t id = 0; id < flows_.size(); ++id) {
    Flow& f = flows_[id];
    if (!f.active) continue;
    f.route = &topology_.route(f.src, f.dst);
    attach(static_cast<int>(id));
  }
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

// Max-min fairness by progressive filling: repeatedly take the link whose remaining
// capacity divided by its unfrozen flows is smallest, give each of those flows that
// share, and remove them from every link they cross.
void FlowTransport::solve() {
  if (dirty_links_.empty()) return;
  ++solves_;
  const double now = engine_.now();
  // The component: every flow reachable from a dirty link through shared links.
  component_links_.clear();
  component_flows_.clear();
  for (int l : dirty_links_) {
    link_dirty_[l] = 0;
    if (!link_seen_[l]) {
      link_seen_[l] = 1;
      component_links_.push_back(l);
    }
  }
  dirty_links_.clear();
  for (std::size_t i = 0; i < component_links_.size(); ++i)
    for (int id : on_link_[component_links_[i]]) {
      if (flow_seen_[id]) continue;
      flow_seen_[id] = 1;
      component_flows_.push_back(id);
      for (int m : *flows_[id].route)
        if (!link_seen_[m]) {
          link_seen_[m] = 1;
          component_links_.push_back(m);
        }
    }
  if (component_flows_.size() <= 1) {
    // The common case in collectives: a flow alone on its links gets the bottleneck
    // bandwidth; no progressive filling needed.
    for (int l : component_links_) link_seen_[l] = 0;
    if (component_flows_.empty()) return;
    const int id = component_flows_.front();
    flow_seen_[id] = 0;
    Flow& f = flows_[id];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.updated_at));
    f.updated_at = now;
    double rate = std::numeric_limits<double>::infinity();
    for (int l : *f.route) rate = std::min(rate, link_bandwidth(l));
    if (rate != f.rate) {  // otherwise its completion entry is still right
      f.rate = rate;
      f.finish_at = now + f.remaining / f.rate;
      ++f.version;
      due_.push({f.finish_at, start_order_[id], id, f.version});
    }
    schedule_next_completion();
    return;
  }
  using Entry = std::pair<double, int>;  // (fair share, link), smallest first; ties by link id
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (int l : component_links_) {
    link_seen_[l] = 0;
    capacity_[l] = link_bandwidth(l);
    unfrozen_[l] = static_cast<int>(on_link_[l].size());
    if (unfrozen_[l] > 0) heap.push({capacity_[l] / unfrozen_[l], l});
  }
  for (int id : component_flows_) {  // bring the bytes left up to date at the old rates
    Flow& f = flows_[id];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.updated_at));
    f.updated_at = now;
  }
  while (!heap.empty()) {
    auto [share, l] = heap.top();
    heap.pop();
    if (unfrozen_[l] == 0 || share != capacity_[l] / unfrozen_[l]) continue;  // stale entry
    for (int id : on_link_[l]) {
      if (!flow_seen_[id]) continue;  // already frozen
      flow_seen_[id] = 0;
      flows_[id].rate = share;
      for (int m : *flows_[id].route) {
        capacity_[m] = std::max(0.0, capacity_[m] - share);
        if (--unfrozen_[m] > 0 && m != l) heap.push({capacity_[m] / unfrozen_[m], m});
      }
    }
  }
  for (int id : component_flows_) {
    Flow& f = flows_[id];
    f.finish_at = f.rate > 0 ? now + f.remaining / f.rate : std::numeric_limits<double>::infinity();
    ++f.version;
    if (f.rate > 0) due_.push({f.finish_at, start_order_[id], id, f.version});
  }
  schedule_next_completion();
}

void FlowTransport::schedule_next_completion() {
  while (!due_.empty()) {
    const Due& top = due_.top();
    if (flows_[top.flow].active && flows_[top.flow].version == top.version) break;
    due_.pop();  // stale
  }
  if (due_.empty()) return;
  const double next = due_.top().time;
  if (scheduled_at_ >= 0 && scheduled_at_ <= next) return;  // an event at or before it is pending
  scheduled_at_ = next;
  engine_.call_at(next, [this, next] {
    if (scheduled_at_ == next) scheduled_at_ = -1.0;
    complete_due();
  });
}

void FlowTransport::complete_due() {
  const double now = engine_.now();
  std::vector<std::function<void()>> done;
  while (!due_.empty() && due_.top().time <= now) {
    const Due d = due_.top();
    due_.pop();
    Flow& f = flows_[d.flow];
    if (!f.active || f.version != d.version) continue;
    f.active = false;
    --active_count_;
    detach(d.flow);
    done.push_back(std::move(f.arrived));
    f.arrived = nullptr;
    free_ids_.push_back(d.flow);
  }
  // Messages sent by these callbacks at this instant join the same solve.
  for (auto& arrived : done) arrived();
  if (!dirty_links_.empty()) request_solve();
  schedule_next_completion();
}

std::unique_ptr<Transport> make_transport(const std::string& model, sim::Engine& engine, Topology topology,
                                          Perturbations perturbations) {
  if (model == "alpha_beta") return std::make_unique<UncontendedTransport>(engine, std::move(topology), std::move(perturbations));
  if (model == "flow") return std::make_unique<FlowTransport>(engine, std::move(topology), std::move(perturbations));
  throw std::invalid_argument(fmt::format("unknown transport model \"{}\" (expected alpha_beta or flow)", model));
}

}  // namespace dtsim::net
