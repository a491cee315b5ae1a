#include "network_models/transport.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/network_model.hpp"

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

int Transport::new_message(int src, int dst, double bytes) {
  ++messages_;
  bytes_ += bytes;
  int id;
  if (free_messages_.empty()) {
    id = static_cast<int>(in_flight_.size());
    in_flight_.emplace_back();
  } else {
    id = free_messages_.back();
    free_messages_.pop_back();
  }
  Message& m = in_flight_[id];
  m.bytes = bytes;
  m.sent_at = engine_.now();
  m.src = src;
  m.dst = dst;
  return id;
}

void Transport::send(int src, int dst, double bytes, std::function<void()> arrived) {
  const int id = new_message(src, dst, bytes);
  in_flight_[id].arrived = std::move(arrived);
  send_message(id);
}

void Transport::send(int src, int dst, double bytes, std::shared_ptr<Sink> sink, std::uint64_t tag) {
  const int id = new_message(src, dst, bytes);
  in_flight_[id].sink = std::move(sink);
  in_flight_[id].tag = tag;
  send_message(id);
}

void Transport::send_message(int id) {
  const int src = in_flight_[id].src, dst = in_flight_[id].dst;
  try {
    const Topology::Route& route = topology_.route_info(src, dst);
    in_flight_[id].route = &route;
    in_flight_[id].routes_version = topology_.routes_version();
    double delay = perturbations_.overhead_s + route.latency_s;
    if (perturbations_.jitter_s > 0)
      delay += std::uniform_real_distribution<double>(0.0, perturbations_.jitter_s)(jitter_rng_);
    if (src == dst) {
      deliver_at(engine_.now() + delay, id);
      return;
    }
    // The route is taken when the bytes start to flow, so a failure during the latency
    // phase is already avoided: the one looked up at send unless routes changed since.
    engine_.call_at(engine_.now() + delay, *this, static_cast<std::uint64_t>(id) << 1 | 1);
  } catch (...) {  // e.g. no route: the message never leaves
    in_flight_[id].arrived = nullptr;
    in_flight_[id].sink.reset();
    free_messages_.push_back(id);
    throw;
  }
}

void Transport::deliver(int id) {
  Message& m = in_flight_[id];
  const auto arrived = std::move(m.arrived);
  m.arrived = nullptr;
  const auto sink = std::move(m.sink);
  const auto tag = m.tag;
  if (trace_)
    trace_->complete(trace_->track("network", fmt::format("{}->{}", m.src, m.dst)), "message", m.sent_at,
                     engine_.now(), {{"bytes", m.bytes}});
  // Freed first: the receiver may send (and so reuse the entry, or grow the pool).
  free_messages_.push_back(id);
  if (sink) sink->message_arrived(tag);
  else if (arrived) arrived();
}

void Transport::deliver_at(double t, int id) { engine_.call_at(t, *this, static_cast<std::uint64_t>(id) << 1); }

void Transport::on_event(std::uint64_t arg) {
  const int id = static_cast<int>(arg >> 1);
  if (!(arg & 1)) {
    deliver(id);
    return;
  }
  const Message& m = in_flight_[id];
  transmit(m.routes_version == topology_.routes_version() ? *m.route : topology_.route_info(m.src, m.dst), m.bytes,
           id);
}

void UncontendedTransport::transmit(const Topology::Route& route, double bytes, int message) {
  double bottleneck = std::numeric_limits<double>::infinity();
  for (int l : route.links) bottleneck = std::min(bottleneck, link_bandwidth(l));
  const double duration = route.links.empty() ? 0.0 : bytes / bottleneck;
  deliver_at(engine_.now() + duration, message);
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

void FlowTransport::transmit(const Topology::Route& route, double bytes, int message) {
  if (bytes <= 0.0 || route.links.empty()) {
    deliver_at(engine_.now(), message);
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
  f.route = &route.links;
  f.remaining = bytes;
  f.rate = 0.0;
  f.updated_at = engine_.now();
  f.message = message;
  f.src = topology_.links()[route.links.front()].src;
  f.dst = topology_.links()[route.links.back()].dst;
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
//
// Only the flows connected (through shared links) to a dirty link can change rate, and
// each connected component is solved on its own: rates in one never depend on another,
// and most components in a collective are one flow alone on its links, which needs no
// filling at all.
void FlowTransport::solve() {
  if (dirty_links_.empty()) return;
  ++solves_;
  const double now = engine_.now();
  for (int l : dirty_links_) link_dirty_[l] = 0;
  std::vector<int> dirty;  // the member's buffer, lent for this call
  dirty.swap(dirty_links_);
  component_links_.clear();  // every link seen in this solve, component by component
  for (int start : dirty) {
    if (link_seen_[start]) continue;  // in a component solved already
    const std::size_t first_link = component_links_.size();
    link_seen_[start] = 1;
    component_links_.push_back(start);
    component_flows_.clear();
    for (std::size_t i = first_link; i < component_links_.size(); ++i)
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
    if (component_flows_.size() == 1) solve_alone(component_flows_.front(), now);
    else if (!component_flows_.empty()) fill(first_link, now);
  }
  for (int l : component_links_) link_seen_[l] = 0;
  dirty.clear();
  dirty_links_.swap(dirty);  // nothing was marked dirty meanwhile: hand the buffer back
  due_.seal();
  schedule_next_completion();
}

// A flow alone on its links gets the bottleneck bandwidth.
void FlowTransport::solve_alone(int id, double now) {
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
}

// Progressive filling over component_flows_ and the links component_links_[first_link..].
void FlowTransport::fill(std::size_t first_link, double now) {
  using Entry = std::pair<double, int>;  // (fair share, link), smallest first; ties by link id
  const auto later = std::greater<Entry>();
  auto& heap = share_heap_;
  heap.clear();
  for (std::size_t i = first_link; i < component_links_.size(); ++i) {
    const int l = component_links_[i];
    capacity_[l] = link_bandwidth(l);
    unfrozen_[l] = static_cast<int>(on_link_[l].size());
    if (unfrozen_[l] > 0) {
      heap.push_back({capacity_[l] / unfrozen_[l], l});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
  for (int id : component_flows_) {  // bring the bytes left up to date at the old rates
    Flow& f = flows_[id];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.updated_at));
    f.updated_at = now;
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const auto [share, l] = heap.back();
    heap.pop_back();
    if (unfrozen_[l] == 0 || share != capacity_[l] / unfrozen_[l]) continue;  // stale entry
    for (int id : on_link_[l]) {
      if (!flow_seen_[id]) continue;  // already frozen
      flow_seen_[id] = 0;
      flows_[id].rate = share;
      for (int m : *flows_[id].route) {
        capacity_[m] = std::max(0.0, capacity_[m] - share);
        if (--unfrozen_[m] > 0 && m != l) {
          heap.push_back({capacity_[m] / unfrozen_[m], m});
          std::push_heap(heap.begin(), heap.end(), later);
        }
      }
    }
  }
  for (int id : component_flows_) {
    Flow& f = flows_[id];
    f.finish_at = f.rate > 0 ? now + f.remaining / f.rate : std::numeric_limits<double>::infinity();
    ++f.version;
    if (f.rate > 0) due_.push({f.finish_at, start_order_[id], id, f.version});
  }
}

void FlowTransport::DueQueue::seal() {
  if (open_.empty()) return;
  int id;
  if (free_runs_.empty()) {
    id = static_cast<int>(runs_.size());
    runs_.emplace_back();
  } else {
    id = free_runs_.back();
    free_runs_.pop_back();
  }
  Run& run = runs_[id];
  run.entries.swap(open_);  // the open batch becomes the run; the run's old buffer is reused
  open_.clear();
  run.pos = 0;
  if (!std::is_sorted(run.entries.begin(), run.entries.end())) std::sort(run.entries.begin(), run.entries.end());
  heap_.push_back(id);
  for (std::size_t i = heap_.size() - 1; i > 0;) {
    const std::size_t parent = (i - 1) / 2;
    if (!later(heap_[parent], heap_[i])) break;
    std::swap(heap_[parent], heap_[i]);
    i = parent;
  }
}

void FlowTransport::DueQueue::pop() {
  const int id = heap_.front();
  Run& run = runs_[id];
  if (++run.pos == run.entries.size()) {
    free_runs_.push_back(id);
    heap_.front() = heap_.back();
    heap_.pop_back();
  }
  if (!heap_.empty()) sift_down(0);
}

void FlowTransport::DueQueue::sift_down(std::size_t i) {
  for (;;) {
    const std::size_t l = 2 * i + 1, r = l + 1;
    std::size_t m = i;
    if (l < heap_.size() && later(heap_[m], heap_[l])) m = l;
    if (r < heap_.size() && later(heap_[m], heap_[r])) m = r;
    if (m == i) return;
    std::swap(heap_[i], heap_[m]);
    i = m;
  }
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
  std::vector<int> done;  // the member's buffer, lent for this call
  done.swap(completed_);
  done.clear();
  while (!due_.empty() && due_.top().time <= now) {
    const Due d = due_.top();
    due_.pop();
    Flow& f = flows_[d.flow];
    if (!f.active || f.version != d.version) continue;
    f.active = false;
    --active_count_;
    detach(d.flow);
    done.push_back(f.message);
    f.message = -1;
    free_ids_.push_back(d.flow);
  }
  // Messages sent by their receivers at this instant join the same solve.
  for (int message : done) deliver(message);
  completed_.swap(done);
  if (!dirty_links_.empty()) request_solve();
  schedule_next_completion();
}

std::unique_ptr<Transport> make_transport(const std::string& model, sim::Engine& engine, Topology topology,
                                          Perturbations perturbations) {
  return network_model(model).make_transport(engine, std::move(topology), std::move(perturbations));
}

}  // namespace dtsim::net
