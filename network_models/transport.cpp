#include "network_models/transport.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/collective_reuse.hpp"
#include "network_models/network_model.hpp"

namespace dtsim::net {

Transport::Transport(sim::Engine& engine, Topology topology, Perturbations perturbations)
    : engine_(engine), topology_(std::move(topology)), perturbations_(std::move(perturbations)),
      jitter_rng_(perturbations_.jitter_seed), shortcuts_(*this, engine),
      last_route_(static_cast<std::size_t>(topology_.nodes())) {
  for (const auto& link : topology_.links()) bandwidth_.push_back(link.params.bandwidth_bytes_per_s);
  // On the engine's time grid, as every time the simulation computes.
  for (auto& change : perturbations_.bandwidth_trace) change.time_s = engine_.time_grid().round(change.time_s);
  for (auto& failure : perturbations_.failures) failure.time_s = engine_.time_grid().round(failure.time_s);
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
      ++perturbation_epoch_;
      on_bandwidth_change();
    });
  }
  for (const auto& failure : perturbations_.failures)
    engine_.call_at(failure.time_s, [this, failure] {
      ++perturbation_epoch_;
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
    arrived_.emplace_back();
    next_start_.push_back(-1);
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

double Transport::next_perturbation_at_or_after(double t) const {
  double next = std::numeric_limits<double>::infinity();
  for (const auto& c : perturbations_.bandwidth_trace)
    if (c.time_s >= t) next = std::min(next, c.time_s);
  for (const auto& f : perturbations_.failures)
    if (f.time_s >= t) next = std::min(next, f.time_s);
  return next;
}

double Transport::bottleneck(std::span<const int> links) const {
  double smallest = std::numeric_limits<double>::infinity();
  for (int l : links) smallest = std::min(smallest, bandwidth_[l]);
  return smallest;
}

namespace {
// A namespace-scope object rather than a function-local static: on_event compares every
// message's sink with its address, and a local static's initialisation guard would be a
// load more per message.
struct DiscardedSink final : Transport::Sink {
  void message_arrived(std::uint64_t) override {}
};
DiscardedSink discarded;
}  // namespace

Transport::Sink& Transport::discarded_sink() { return discarded; }

void Transport::cancel(const Sink& sink) {
  for (auto& m : in_flight_)
    if (m.sink == &sink) m.sink = &discarded_sink();
  on_cancel();
}

void Transport::send(int src, int dst, double bytes, std::function<void()> arrived) {
  shortcuts_.on_send();
  const int id = new_message(src, dst, bytes);
  in_flight_[id].sink = nullptr;
  arrived_[id] = std::move(arrived);
  send_message(id);
}

void Transport::send(int src, int dst, double bytes, Sink& sink, std::uint64_t tag) {
  shortcuts_.on_send();
  const int id = new_message(src, dst, bytes);
  in_flight_[id].sink = &sink;
  in_flight_[id].tag = tag;
  send_message(id);
}

void Transport::send_message(int id) {
  Message& m = in_flight_[id];
  const int src = m.src, dst = m.dst;
  try {
    if (src < 0 || src >= topology_.nodes()) topology_.route_info(src, dst);  // throws, naming both
    LastRoute& last = last_route_[static_cast<std::size_t>(src)];
    if (last.dst != dst || last.routes_version != topology_.routes_version()) {
      const Topology::Route& route = topology_.route_info(src, dst);
      last.dst = dst;
      last.routes_version = topology_.routes_version();
      last.route = &route;
      last.latency_s = route.latency_s;
      last.hops = static_cast<int>(route.links.size());
      if (last.hops <= kInlineLinks) std::copy(route.links.begin(), route.links.end(), last.links);
    }
    // The route is taken when the bytes start to flow, so a failure during the latency
    // phase is already avoided: the one looked up at send unless routes changed since.
    m.hops = last.hops;
    // All kInlineLinks, whatever the hops: a fixed-size copy is two moves, a copy of
    // `hops` a call to memmove.
    if (last.hops <= kInlineLinks) std::copy_n(last.links, kInlineLinks, m.links);
    else m.route = last.route;
    m.routes_version = static_cast<std::uint32_t>(last.routes_version);
    double delay = fixed_delay(last.latency_s);
    if (perturbations_.jitter_s > 0)
      delay += std::uniform_real_distribution<double>(0.0, perturbations_.jitter_s)(jitter_rng_);
    if (src == dst) {
      deliver_at(later(engine_.now(), delay), id);
      return;
    }
    schedule_start(later(engine_.now(), delay), id);
  } catch (...) {  // e.g. no route: the message never leaves
    arrived_[id] = nullptr;
    m.sink = nullptr;
    free_messages_.push_back(id);
    throw;
  }
}

void Transport::deliver(int id) {
  Message& m = in_flight_[id];
  Sink* const sink = m.sink;
  const auto tag = m.tag;
  std::function<void()> arrived;
  if (!sink) arrived = std::exchange(arrived_[id], nullptr);
  if (trace_)
    trace_->complete(trace_->track("network", fmt::format("{}->{}", m.src, m.dst)), "message", m.sent_at,
                     engine_.now(), {{"bytes", m.bytes}});
  // Freed first: the receiver may send (and so reuse the entry, or grow the pool).
  free_messages_.push_back(id);
  if (sink) sink->message_arrived(tag);
  else if (arrived) arrived();
}

void Transport::schedule_start(double t, int id) {
  next_start_[id] = -1;
  OpenStartBatch& open = open_starts_;
  if (open.head >= 0 && t == open.time && engine_.events_scheduled() == open.scheduled) {
    next_start_[open.tail] = id;
    open.tail = id;
    return;
  }
  engine_.call_at(t, *this, static_cast<std::uint64_t>(id) << 2 | kStartTransfer);
  open = {id, id, t, engine_.events_scheduled()};
}

void Transport::deliver_at(double t, int id) {
  engine_.call_at(t, *this, static_cast<std::uint64_t>(id) << 2 | kDeliver);
}

void Transport::model_event_at(double t, std::uint64_t code) { engine_.call_at(t, *this, code << 2 | kModelEvent); }

void Transport::model_event_now_reserved(std::uint64_t seq, std::uint64_t code) {
  engine_.call_now_reserved(seq, *this, code << 2 | kModelEvent);
}

void Transport::on_event(std::uint64_t arg) {
  const auto kind = arg & 3;
  if (kind == kModelEvent) {
    on_model_event(arg >> 2);
    return;
  }
  const int id = static_cast<int>(arg >> 2);
  if (kind == kDeliver) {
    deliver(id);
    return;
  }
  if (open_starts_.head == id) open_starts_.head = -1;  // this batch is closed now
  for (int message = id, next; message >= 0; message = next) {
    next = next_start_[message];  // first: starting `message` may free it for reuse
    start_transfer(message);
  }
  after_starts();
}

void Transport::start_transfer(int id) {
  const Message& m = in_flight_[id];
  if (m.sink == &discarded_sink()) {  // cancelled in its latency phase: it never starts
    free_messages_.push_back(id);
    return;
  }
  if (m.routes_version != static_cast<std::uint32_t>(topology_.routes_version())) {
    transmit(topology_.route(m.src, m.dst), m.bytes, id);  // rerouted during the latency phase
    return;
  }
  if (m.hops <= kInlineLinks) transmit({m.links, static_cast<std::size_t>(m.hops)}, m.bytes, id);
  else transmit(m.route->links, m.bytes, id);
}

// bytes / infinity is 0: no links, no transfer time.
void UncontendedTransport::transmit(std::span<const int> links, double bytes, int message) {
  deliver_at(later(engine_.now(), bytes / bottleneck(links)), message);
}

FlowTransport::FlowTransport(sim::Engine& engine, Topology topology, Perturbations perturbations)
    : Transport(engine, std::move(topology), std::move(perturbations)) {
  const auto links = topology_.links().size();
  links_.resize(links);
  for (std::size_t l = 0; l < links; ++l) links_[l].bandwidth = link_bandwidth(static_cast<int>(l));
  capacity_.assign(links, 0.0);
  unfrozen_.assign(links, 0);
}

void FlowTransport::LinkState::add(int id) {
  if (count < kInline) {
    first[count] = id;
  } else {
    if (!more) more = std::make_unique<std::vector<int>>();
    more->push_back(id);
  }
  ++count;
}

// Keeps the attach order of the others (the order a solve visits them in).
void FlowTransport::LinkState::remove(int id) {
  int i = 0;
  while (at(i) != id) ++i;
  for (; i + 1 < count; ++i) {
    const int next = at(i + 1);
    if (i < kInline) first[i] = next;
    else (*more)[static_cast<std::size_t>(i - kInline)] = next;
  }
  if (count > kInline) more->pop_back();
  --count;
}

void FlowTransport::attach(int id) {
  for (int l : flows_[id].links()) {
    links_[l].add(id);
    mark_dirty(l);
  }
}

// A link left empty needs no solve: no flow on it to give a rate.
void FlowTransport::detach(int id) {
  for (int l : flows_[id].links()) {
    links_[l].remove(id);
    if (links_[l].count > 0) mark_dirty(l);
  }
}

bool FlowTransport::attach_if_alone(int id, double& bottleneck) {
  bool alone = true;
  bottleneck = std::numeric_limits<double>::infinity();
  for (int l : flows_[id].links()) {
    LinkState& link = links_[l];
    link.add(id);
    alone = alone && link.count == 1;
    bottleneck = std::min(bottleneck, link.bandwidth);
  }
  if (!alone)
    for (int l : flows_[id].links()) mark_dirty(l);
  return alone;
}

// A link may be listed twice (a flow left it and another joined at the same instant):
// the second visit finds its component solved already, or its flow alone and given the
// same rate again, which changes nothing. Cheaper than a flag per link to clear.
void FlowTransport::mark_dirty(int link) { dirty_links_.push_back(link); }

// Element by element, unrolled: std::copy of at most kInlineLinks ints is a call to
// memmove, a good share of a transfer's start.
void FlowTransport::copy_short_route(std::span<const int> from, int* to) {
  const std::size_t n = from.size();
  if (n > 0) to[0] = from[0];
  if (n > 1) to[1] = from[1];
  if (n > 2) to[2] = from[2];
  if (n > 3) to[3] = from[3];
  static_assert(kInlineLinks == 4);
}

bool FlowTransport::alone(const Flow& f) const {
  for (int l : f.links())
    if (links_[l].count != 1) return false;
  return true;
}

void FlowTransport::transmit(std::span<const int> links, double bytes, int message) {
  check_holds(links);
  if (bytes <= 0.0 || links.empty()) {
    deliver_at(engine_.now(), message);
    return;
  }
  int id;
  if (free_ids_.empty()) {
    id = static_cast<int>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
  }
  Flow& f = flows_[id];
  f.hops = static_cast<std::uint16_t>(links.size());
  if (links.size() <= kInlineLinks) copy_short_route(links, f.inline_links);
  else f.long_links = links.data();  // the topology's route: valid until a link fails
  f.remaining = bytes;
  f.rate = 0.0;
  f.updated_at = engine_.now();
  f.message = message;
  f.active = true;
  ++f.version;
  f.start_order = started_++;
  ++active_count_;
  // Alone on its links (a ring's step, mostly), the flow's rate is its bottleneck's now,
  // whatever else starts at this instant: a flow that joins it later marks the links
  // dirty, and the solve gives both their shares. Its completion candidate waits in the
  // open batch for the solve, as the others' do.
  if (double bottleneck; attach_if_alone(id, bottleneck)) give_alone_rate(id, engine_.now(), bottleneck);
  defer_solve();  // settled once the start event's transfers have all started
}

void FlowTransport::on_cancel() {
  for (std::size_t id = 0; id < flows_.size(); ++id) {
    Flow& f = flows_[id];
    if (!f.active || !cancelled(f.message)) continue;
    f.active = false;
    --active_count_;
    detach(static_cast<int>(id));
    free_message(f.message);
    f.message = -1;
    free_ids_.push_back(static_cast<int>(id));
  }
  if (active_count_ == 0) {
    // Nothing left: the state of a network whose last flow has just completed, so that
    // the next flows are scheduled as they would be there (no stale completion event
    // to wait for).
    due_.clear();
    scheduled_at_ = -1.0;
    dirty_links_.clear();
  } else {
    request_solve();
  }
}

void FlowTransport::on_bandwidth_change() {
  for (std::size_t l = 0; l < links_.size(); ++l) {
    links_[l].bandwidth = link_bandwidth(static_cast<int>(l));
    mark_dirty(static_cast<int>(l));
  }
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
    const auto& route = topology_.route(message_src(f.message), message_dst(f.message));
    f.hops = static_cast<std::uint16_t>(route.size());
    if (route.size() <= kInlineLinks) copy_short_route(route, f.inline_links);
    else f.long_links = route.data();
    attach(static_cast<int>(id));
  }
  request_solve();
}

// Flows that start at the same instant are solved together: the solve runs as an event
// at the current time, after the events already queued for it.
void FlowTransport::request_solve() {
  if (solve_pending_) return;
  solve_pending_ = true;
  model_event_at(engine_.now(), kSolve);
}

void FlowTransport::defer_solve() {
  if (solve_pending_) return;
  solve_pending_ = true;
  solve_deferred_ = true;
  deferred_solve_seq_ = engine_.reserve_sequence();
}

void FlowTransport::settle_solve() {
  if (!solve_deferred_) return;
  solve_deferred_ = false;
  if (engine_.events_pending_now()) {
    model_event_now_reserved(deferred_solve_seq_, kSolve);
    return;
  }
  solve_pending_ = false;
  solve();
}

void FlowTransport::on_model_event(std::uint64_t code) {
  if (code == kSolve) {
    solve_pending_ = false;
    solve();
  } else {  // kCompletion, scheduled at scheduled_at_ unless an earlier one replaced it
    if (scheduled_at_ == engine_.now()) scheduled_at_ = -1.0;
    complete_due();
  }
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
  if (dirty_links_.empty() && !due_.batch_open()) return;
  ++solves_;
  const double now = engine_.now();
  std::vector<int> dirty;  // the member's buffer, lent for this call
  dirty.swap(dirty_links_);
  component_links_.clear();  // every link seen in this solve, component by component
  for (int start : dirty) {
    const LinkState& link = links_[start];
    if (link.seen || link.count == 0) continue;  // in a component solved already, or empty
    // The common case in a collective: one flow, alone on each of its links, is a
    // component by itself; no search, no marks.
    if (link.count == 1 && alone(flows_[link.first[0]])) {
      solve_alone(link.first[0], now);
      continue;
    }
    const std::size_t first_link = component_links_.size();
    links_[start].seen = true;
    component_links_.push_back(start);
    component_flows_.clear();
    for (std::size_t i = first_link; i < component_links_.size(); ++i)
      links_[component_links_[i]].for_each([&](int id) {
        Flow& f = flows_[id];
        if (f.seen) return;
        f.seen = true;
        component_flows_.push_back(id);
        for (int m : f.links())
          if (!links_[m].seen) {
            links_[m].seen = true;
            component_links_.push_back(m);
          }
      });
    if (component_flows_.size() == 1) solve_alone(component_flows_.front(), now);
    else if (!component_flows_.empty()) fill(first_link, now);
  }
  for (int l : component_links_) links_[l].seen = false;
  dirty.clear();
  dirty_links_.swap(dirty);  // nothing was marked dirty meanwhile: hand the buffer back
  due_.seal();
  schedule_next_completion();
}

// A flow alone on its links gets the bottleneck bandwidth. Solving it twice at one
// instant is harmless: nothing has moved since (rate * 0), and the rate is the same.
void FlowTransport::solve_alone(int id, double now) {
  double rate = std::numeric_limits<double>::infinity();
  for (int l : flows_[id].links()) rate = std::min(rate, links_[l].bandwidth);
  give_alone_rate(id, now, rate);
}

void FlowTransport::give_alone_rate(int id, double now, double rate) {
  Flow& f = flows_[id];
  f.seen = false;
  f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.updated_at));
  f.updated_at = now;
  if (rate != f.rate) {  // otherwise its completion entry is still right
    f.rate = rate;
    ++f.version;
    due_.push({later(now, f.remaining / f.rate), f.start_order, id, f.version});
  }
}

// Progressive filling over component_flows_ and the links component_links_[first_link..].
void FlowTransport::fill(std::size_t first_link, double now) {
  using Entry = std::pair<double, int>;  // (fair share, link), smallest first; ties by link id
  const auto smallest_first = std::greater<Entry>();
  auto& heap = share_heap_;
  heap.clear();
  for (std::size_t i = first_link; i < component_links_.size(); ++i) {
    const int l = component_links_[i];
    capacity_[l] = links_[l].bandwidth;
    unfrozen_[l] = links_[l].count;
    if (unfrozen_[l] > 0) {
      heap.push_back({capacity_[l] / unfrozen_[l], l});
      std::push_heap(heap.begin(), heap.end(), smallest_first);
    }
  }
  for (int id : component_flows_) {  // bring the bytes left up to date at the old rates
    Flow& f = flows_[id];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.updated_at));
    f.updated_at = now;
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), smallest_first);
    const auto [share, l] = heap.back();
    heap.pop_back();
    if (unfrozen_[l] == 0 || share != capacity_[l] / unfrozen_[l]) continue;  // stale entry
    links_[l].for_each([&, share = share, l = l](int id) {
      Flow& f = flows_[id];
      if (!f.seen) return;  // already frozen
      f.seen = false;
      f.rate = share;
      for (int m : f.links()) {
        capacity_[m] = std::max(0.0, capacity_[m] - share);
        if (--unfrozen_[m] > 0 && m != l) {
          heap.push_back({capacity_[m] / unfrozen_[m], m});
          std::push_heap(heap.begin(), heap.end(), smallest_first);
        }
      }
    });
  }
  for (int id : component_flows_) {
    Flow& f = flows_[id];
    ++f.version;
    if (f.rate > 0) due_.push({later(now, f.remaining / f.rate), f.start_order, id, f.version});
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
  model_event_at(next, kCompletion);
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
  delivering_ = done.size();
  for (int message : done) {
    --delivering_;
    deliver(message);
  }
  completed_.swap(done);
  if (!dirty_links_.empty()) defer_solve();
  // Before the solve, as when the solve was an event of its own: the completion event
  // this may schedule keeps its sequence (a solve run here checks the front again).
  schedule_next_completion();
  settle_solve();
}

std::unique_ptr<Transport> make_transport(const std::string& model, sim::Engine& engine, Topology topology,
                                          Perturbations perturbations) {
  const auto& entry = network_model(model);
  auto transport = entry.make_transport(engine, std::move(topology), std::move(perturbations));
  transport->shortcuts().evaluate_rings(entry.rings_as_recurrence);
  return transport;
}

}  // namespace dtsim::net
