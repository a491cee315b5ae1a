#include "network_models/collective_execution.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/ring_recurrence.hpp"

namespace dtsim::net {

ScheduledExecution::ScheduledExecution(Transport& transport, std::shared_ptr<const Schedule> schedule, RankDone done,
                                       CollectiveReuse* reuse, std::string shape)
    : transport_(transport), schedule_(std::move(schedule)), done_(std::move(done)) {
  restarts_ = reuse;
  watch_.reuse = reuse && reuse->enabled() ? reuse : nullptr;
  watch_.shape = std::move(shape);
  if (watch_.reuse) transport_.shortcuts().count_rounding_ties();  // its records are keyed by them
  if (schedule_->size() != transport_.topology().size())
    throw std::invalid_argument(fmt::format("{} schedule for {} ranks on a {}-rank topology", schedule_->name,
                                            schedule_->size(), transport_.topology().size()));
  if (schedule_->size() > kMaxRanks)
    throw std::invalid_argument(fmt::format("{} schedule for {} ranks: at most {} supported", schedule_->name,
                                            schedule_->size(), kMaxRanks));
  first_lane_.push_back(0);
  for (int r = 0; r < schedule_->size(); ++r) {
    if (schedule_->lane_count(r) > kMaxLanes)
      throw std::invalid_argument(
          fmt::format("{} schedule: rank {} has {} lanes, at most {}", schedule_->name, r, schedule_->lane_count(r), kMaxLanes));
    first_lane_.push_back(first_lane_.back() + schedule_->lane_count(r));
    lanes_left_.push_back(schedule_->lane_count(r));
  }
  lanes_.resize(static_cast<std::size_t>(first_lane_.back()));
}

void ScheduledExecution::arrive(int rank) {
  const bool first = arrivals_++ == 0;
  if (watch_.reuse) {
    if (watch_.arrived++ == 0) watch_first_arrival();
    if (watch_.replay) return arrive_replayed(rank);
    // Shifts are exact for times on the grid (or in one binade): one that is not, which
    // nothing in the simulation computes, is not recorded.
    if (!transport_.engine().time_grid().on_grid(transport_.engine().now())) {
      watch_.candidate = false;
      if (watch_.period) watch_.period->recording = false;
    }
    if (watch_.candidate) watch_.arrival[rank] = transport_.engine().now() - watch_.first_arrival;
    if (watch_.period) record_in_period(rank, true);
  }
  if (first) decide_evaluation();
  if (evaluated_) return wavefront_ ? arrive_in_wavefront(rank) : arrive_evaluated(rank);
  if (lanes_left_.at(rank) == 0) {
    finish(rank);
  } else {
    for (int lane = 0; lane < first_lane_[rank + 1] - first_lane_[rank]; ++lane) {
      state(rank, lane).started = true;
      start_step(rank, lane);
    }
  }
  if (watch_.candidate && watch_.arrived == schedule_->size()) try_replay();
}

// ---- The plain message path: every step's sends and receives, one message at a time ----

void ScheduledExecution::start_step(int rank, int lane) {
  auto& st = state(rank, lane);
  if (st.step == schedule_->step_count(rank, lane)) {
    if (--lanes_left_[rank] == 0) finish(rank);
    return;
  }
  st.pending_receives = 0;
  if (schedule_->compact_ring()) {  // one send, one receive: no Step to fill
    const Transfer t = schedule_->ring_send(rank, st.step);
    st.pending_sends = 1;
    expect(st, schedule_->ring_receive_from(rank));
    send(rank, lane, t.peer, t.bytes);
  } else {
    const Step& step = schedule_->step(rank, lane, st.step, scratch_);
    st.pending_sends = static_cast<int>(step.sends.size());
    for (int peer : step.receives) expect(st, peer);
    for (const auto& t : step.sends) send(rank, lane, t.peer, t.bytes);
  }
  maybe_advance(rank, lane);
}

// One more receive from `peer` in the current step, unless it has arrived already.
void ScheduledExecution::expect(LaneState& st, int peer) {
  int& early = st.mailbox[peer];
  if (early > 0) {
    --early;
  } else {
    ++st.waiting[peer];
    ++st.pending_receives;
  }
}

void ScheduledExecution::send(int rank, int lane, int peer, double bytes) {
  transport_.send(rank, peer, bytes, *this, pack(rank, lane, peer));  // first: it may throw (no route)
  ++watch_.own_sends;
  if (watch_.period) ++watch_.period->member_sends;
  watch_.last_own_send = transport_.engine().now();
  if (in_flight_++ == 0) self_while_in_flight_ = shared_from_this();
}

void ScheduledExecution::message_arrived(std::uint64_t tag) {
  const int rank = static_cast<int>(tag >> (kPeerBits + kLaneBits));
  const int lane = static_cast<int>((tag >> kPeerBits) & ((1u << kLaneBits) - 1));
  const int peer = static_cast<int>(tag & ((std::uint64_t{1} << kPeerBits) - 1));
  // Released last, when nothing of this call touches the execution any more (it may
  // be the last reference).
  std::shared_ptr<ScheduledExecution> keep;
  if (--in_flight_ == 0) keep = std::move(self_while_in_flight_);
  if (wavefront_) {
    wavefront_->coupled_arrived(rank, transport_.engine().now());
    if (watch_.candidate && in_flight_ == 0) maybe_record();
    if (watch_.period && in_flight_ == 0) maybe_close_member();
    return;
  }
  deliver(peer, lane, rank);
  --state(rank, lane).pending_sends;
  maybe_advance(rank, lane);
  if (watch_.candidate && in_flight_ == 0) maybe_record();
  if (watch_.period && in_flight_ == 0) maybe_close_member();
}

void ScheduledExecution::deliver(int to, int lane, int from) {
  auto& st = state(to, lane);
  int& waiting = st.waiting[from];
  if (st.started && waiting > 0) {
    --waiting;
    --st.pending_receives;
    maybe_advance(to, lane);
  } else {
    ++st.mailbox[from];
  }
}

void ScheduledExecution::maybe_advance(int rank, int lane) {
  auto& st = state(rank, lane);
  if (st.pending_sends > 0 || st.pending_receives > 0) return;
  if (st.step >= schedule_->step_count(rank, lane)) return;
  ++st.step;
  start_step(rank, lane);
}

void ScheduledExecution::finish(int rank) {
  if (watch_.reuse) {
    ++watch_.done;
    watch_.done_at[rank] = transport_.engine().now() - watch_.first_arrival;
    watch_.order.push_back(rank);
    if (watch_.period) record_in_period(rank, false);
  }
  done_(rank);
  if (watch_.candidate) maybe_record();
  if (watch_.period) maybe_close_member();
}

// ---- The ring's recurrence (ring_recurrence.hpp) ----

// Decided at the first arrival (after collective reuse's look at it: a later member of a
// replayed busy period is never computed), for the whole collective: no message is sent
// until the last rank arrives, or (flow model) only the coupled senders', which is right
// only if nothing else meets the others meanwhile.
void ScheduledExecution::decide_evaluation() {
  const bool ring = transport_.shortcuts().evaluates_rings() && !transport_.jitters() && !transport_.records_messages() &&
                    ring_waits_for_every_rank(*schedule_) &&
                    transport_.next_perturbation_at_or_after(transport_.engine().now()) ==
                        std::numeric_limits<double>::infinity();
  if (!ring) return;
  if (transport_.messages_interact()) {
    evaluated_ = start_wavefront();
    return;
  }
  evaluated_ = true;
  arrived_at_.assign(static_cast<std::size_t>(schedule_->size()), std::numeric_limits<double>::quiet_NaN());
}

// The flow model: computed when a conflict can restart the run (the run's attempts,
// through `restarts_`, with reuse on or off) or none can happen (alone on its engine),
// no replay holds the network, every alone sender's transfers start a positive delay
// after its sends, and its links carry nothing and are claimed by no other ring.
bool ScheduledExecution::start_wavefront() {
  if (!alone_on_engine_ && !(restarts_ && restarts_->evaluation_allowed(watch_.shape))) return false;
  if (transport_.shortcuts().replay_guarded()) return false;
  auto wavefront = std::make_unique<RingWavefront>(*schedule_, transport_, static_cast<RingWavefront::Hooks&>(*this));
  if (!wavefront->alone_delays_positive()) return false;
  std::vector<int> links;
  for (int r = 0; r < schedule_->size(); ++r)
    if (!wavefront->coupled(r)) links.insert(links.end(), wavefront->route(r).begin(), wavefront->route(r).end());
  holder_ = transport_.shortcuts().new_holder(watch_.shape.empty() ? schedule_->name : watch_.shape, restarts_);
  if (!transport_.shortcuts().claim_links(holder_, links)) return false;
  ++watch_.own_sends;  // the claim is this collective's traffic, as its messages are
  if (watch_.period) ++watch_.period->member_sends;
  wavefront_ = std::move(wavefront);
  return true;
}

void ScheduledExecution::arrive_in_wavefront(int rank) {
  const double now = transport_.engine().now();
  if (!wavefront_->coupled(rank))
    transport_.shortcuts().take_links(holder_, wavefront_->route(rank), wavefront_->first_transfer_start(rank, now));
  wavefront_->arrive(rank, now);
  if (arrivals_ == schedule_->size() && watch_.candidate) try_replay();
}

void ScheduledExecution::send_at(int rank, int step, double at) {
  if (at == transport_.engine().now()) return send_in_wavefront(rank, step);
  transport_.engine().call_at(at, [self = shared_from_this(), rank, step] {
    if (!self->watch_.replayed) self->send_in_wavefront(rank, step);
  });
}

void ScheduledExecution::send_in_wavefront(int rank, int step) {
  const Transfer t = schedule_->ring_send(rank, static_cast<std::size_t>(step));
  send(rank, 0, t.peer, t.bytes);
}

void ScheduledExecution::done_at(int rank, double at) {
  transport_.engine().call_at(at, [self = shared_from_this(), rank] {
    if (!self->watch_.replayed) self->finish(rank);
  });
}

void ScheduledExecution::links_free_after(int rank, double at) {
  transport_.shortcuts().free_links_after(holder_, wavefront_->route(rank), at);
}

void ScheduledExecution::release_links() {
  for (int r = 0; r < schedule_->size(); ++r)
    if (!wavefront_->coupled(r)) transport_.shortcuts().release_links(holder_, wavefront_->route(r));
}

// Every rank waits for every other (ring_waits_for_every_rank), so none is done before
// the last arrives: the recurrence runs then, and each rank is done at its time, in
// the order of the times (ties by rank). A record found by collective reuse first
// replays instead; otherwise the times are recorded as the rank finish.
void ScheduledExecution::arrive_evaluated(int rank) {
  double& arrived = arrived_at_.at(static_cast<std::size_t>(rank));
  if (!std::isnan(arrived))
    throw std::logic_error(fmt::format("{}: rank {} arrived twice in one collective", schedule_->name, rank));
  arrived = transport_.engine().now();
  if (arrivals_ < schedule_->size()) return;
  if (watch_.candidate) try_replay();
  if (watch_.replayed) return;
  const std::vector<double> done = ring_done_times(*schedule_, arrived_at_, transport_);
  std::vector<int> order(done.size());
  for (std::size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return done[a] < done[b]; });
  auto self = shared_from_this();
  for (int r : order) transport_.engine().call_at(done[static_cast<std::size_t>(r)], [self, r] { self->finish(r); });
}

// ---- Collective reuse (collective_reuse.hpp) ----

void ScheduledExecution::watch_first_arrival() {
  auto& w = watch_;
  const double now = transport_.engine().now();
  ++w.reuse->stats().collectives;
  // Times of one shift domain shift exactly (the time grid, or a binade: sim/time_grid.hpp);
  // flows in flight would share the links (the flow model); jitter draws would be
  // consumed differently.
  const auto& grid = transport_.engine().time_grid();
  // A ring computed on the flow model holds links while it runs (ring_wavefront.hpp).
  const bool idle = transport_.messages_in_flight() == transport_.messages_being_delivered() && !transport_.shortcuts().holds_live();
  w.candidate = w.reuse->allowed(w.shape) && grid.shifts_exactly(now) && grid.on_grid(now) && !transport_.jitters() &&
                (!transport_.messages_interact() || idle);
  w.first_arrival = now;
  w.shift_domain = grid.shift_domain(now);
  w.last_bit = last_mantissa_bit(now);
  w.ties_before = transport_.shortcuts().rounding_ties();
  w.perturbation_epoch = transport_.perturbation_epoch();
  w.sends_before = transport_.shortcuts().traffic();
  const auto n = static_cast<std::size_t>(schedule_->size());
  w.arrival.assign(n, std::numeric_limits<double>::quiet_NaN());
  w.done_at.assign(n, std::numeric_limits<double>::quiet_NaN());
  if (transport_.messages_interact() && !transport_.jitters()) enter_busy_period(idle);
}

bool ScheduledExecution::isolated(bool but_now) const {
  if (transport_.perturbation_epoch() != watch_.perturbation_epoch) return false;
  if (!transport_.messages_interact()) return true;
  if (!but_now) return transport_.shortcuts().traffic() - watch_.sends_before == watch_.own_sends;
  return watch_.last_own_send < transport_.engine().now() &&
         transport_.shortcuts().traffic_before_now() - watch_.sends_before == watch_.own_sends;
}

ReuseKey ScheduledExecution::reuse_key() const {
  return {watch_.shape, watch_.perturbation_epoch, watch_.shift_domain, watch_.last_bit, watch_.arrival};
}

// Every rank has arrived: the key is complete. With a record, replay; under the flow
// model only after the other events of this instant (a rank that issues two collectives
// at once sends the second's messages right after this call: cross traffic).
void ScheduledExecution::try_replay() {
  if (watch_.done == schedule_->size()) return;
  if (!isolated()) {
    watch_.candidate = false;
    return;
  }
  const ReuseKey key = reuse_key();
  const ReuseRecord* record = watch_.reuse->find(key);
  if (!record) {  // still a candidate: recorded when done, or the head of a busy period
    if (const PeriodRecord* period = transport_.messages_interact() ? watch_.reuse->find_period(key) : nullptr)
      transport_.engine().call_at(transport_.engine().now(),
                                  [self = shared_from_this(), period] { self->commit_period_replay(*period); });
    return;
  }
  if (!transport_.messages_interact()) {
    commit_replay(*record);
    return;
  }
  transport_.engine().call_at(transport_.engine().now(),
                              [self = shared_from_this(), record] { self->commit_replay(*record); });
}

void ScheduledExecution::commit_replay(const ReuseRecord& record) {
  auto& w = watch_;
  if (!w.candidate || !isolated()) {
    w.candidate = false;
    return;
  }
  const auto self = shared_from_this();  // alive past the messages it cancels
  const double end = w.first_arrival + record.end;
  if (!take_over(end, record.done)) return;
  if (transport_.messages_interact()) transport_.shortcuts().guard_replay(this, *w.reuse, w.shape, end, !record.same_instant);
  finish_at_recorded_times(record.done, record.order, w.first_arrival, true);
}

// What both replays check and do first: the window up to `end` lies in the first
// arrival's shift domain with no perturbation in it, and the ranks done before the last
// arrival were done at the recorded times; then the collective is the replay's (its
// messages dropped). False: it is simulated.
bool ScheduledExecution::take_over(double end, const std::vector<double>& done) {
  auto& w = watch_;
  if (transport_.engine().time_grid().shift_domain(end) != w.shift_domain ||
      transport_.next_perturbation_at_or_after(w.first_arrival) <= end)
    return false;
  for (int r = 0; r < schedule_->size(); ++r)
    if (!std::isnan(w.done_at[r]) && w.done_at[r] != done[r]) return false;
  w.candidate = false;
  w.replayed = true;
  ++w.reuse->stats().replayed;
  leave_busy_period();
  if (wavefront_) release_links();
  transport_.cancel(*this);
  in_flight_ = 0;
  self_while_in_flight_.reset();
  return true;
}

void ScheduledExecution::finish_at_recorded_times(const std::vector<double>& done, const std::vector<int>& order,
                                                  double origin, bool end_guard) {
  auto self = shared_from_this();
  for (int r : order) {
    if (!std::isnan(watch_.done_at[r])) continue;  // done before the last arrival, at the recorded time
    transport_.engine().call_at(origin + done[r], [self, r, end_guard] {
      self->finish(r);
      if (end_guard && self->watch_.done == self->schedule_->size()) self->transport_.shortcuts().end_replay_guard(self.get());
    });
  }
}

// ---- Busy periods (busy_period.hpp) ----

void ScheduledExecution::enter_busy_period(bool network_idle) {
  auto& w = watch_;
  auto& reuse = *w.reuse;
  const double now = transport_.engine().now();
  if (auto& replay = reuse.period_replay()) {
    if (replay->next < replay->record->members.size()) {  // the replay's next member, or a conflict
      if (replay->record->members[replay->next].shape != w.shape) period_conflict(*replay);
      w.replay = replay;
      w.member = static_cast<int>(replay->next++);
      ++replay->arriving;
      w.candidate = false;
      ++reuse.stats().replayed;
      return;
    }
    if (now < replay->end) period_conflict(*replay);  // recorded, it would have been a member
    replay.reset();
  }
  auto& open = reuse.open_period();
  if (network_idle) {
    // The open period, if any, leaves the slot to this one. Its members may be ending at
    // this instant (their last messages are the ones being delivered: a rank done with
    // one partition enters the next at once), and then it is kept, ending now; if
    // instead a member goes on (a late rank), this collective's messages reach the
    // network before the period ends, and finish_period drops it.
    open.reset();
    if (!w.candidate) return;
    open = std::make_shared<OpenPeriod>();
    open->first_arrival = now;
    open->shift_domain = w.shift_domain;
    open->last_bit = w.last_bit;
    open->ties_before = w.ties_before;
    open->perturbation_epoch = w.perturbation_epoch;
    open->sends_before = w.sends_before;
  } else if (!open || !open->recording || !reuse.allowed(w.shape) ||
             transport_.perturbation_epoch() != open->perturbation_epoch ||
             transport_.shortcuts().traffic() - open->sends_before != open->member_sends) {
    if (open) open->recording = false;  // something else was on the network
    return;
  }
  w.period = open;
  w.member = static_cast<int>(open->record.members.size());
  ++open->open_members;
  auto& m = open->record.members.emplace_back();
  m.shape = w.shape;
  m.arrival.assign(w.arrival.size(), std::numeric_limits<double>::quiet_NaN());
  m.done.assign(w.arrival.size(), std::numeric_limits<double>::quiet_NaN());
}

void ScheduledExecution::leave_busy_period() {
  auto& w = watch_;
  if (!w.period) return;
  w.period->recording = false;
  if (w.reuse->open_period() == w.period) w.reuse->open_period().reset();
  w.period.reset();
}

void ScheduledExecution::record_in_period(int rank, bool arrived) {
  auto& m = watch_.period->record.members[static_cast<std::size_t>(watch_.member)];
  const double t = transport_.engine().now() - watch_.period->first_arrival;
  if (arrived) {
    m.arrival[rank] = t;
  } else {
    m.done[rank] = t;
    m.order.push_back(rank);
  }
}

// Done and no message in flight: the member no longer holds the period open.
void ScheduledExecution::maybe_close_member() {
  auto& w = watch_;
  if (w.member_closed || w.done < schedule_->size() || in_flight_ > 0) return;
  w.member_closed = true;
  const auto period = w.period;
  if (--period->open_members == 0) finish_period(*period);
}

// The last member is done: the network is idle again. Kept when nothing else touched
// the network before this instant (a message sent now meets none of the members', which
// hold no link any more), it is all in one shift domain, and it has more than one member
// (one alone is a single collective's record).
void ScheduledExecution::finish_period(OpenPeriod& p) {
  auto& reuse = *watch_.reuse;
  if (reuse.open_period().get() == &p) reuse.open_period().reset();
  auto& members = p.record.members;
  if (!p.recording || members.size() < 2) return;
  const double now = transport_.engine().now();
  if (transport_.engine().time_grid().shift_domain(now) != p.shift_domain ||
      transport_.perturbation_epoch() != p.perturbation_epoch ||
      transport_.shortcuts().traffic_before_now() - p.sends_before != p.member_sends)
    return;
  // A later member is finished by the replay once all its ranks have arrived: one with a
  // rank done before its last arrival is not replayed that way.
  for (std::size_t k = 1; k < members.size(); ++k) {
    const auto& m = members[k];
    if (*std::min_element(m.done.begin(), m.done.end()) < *std::max_element(m.arrival.begin(), m.arrival.end()))
      return;
  }
  p.record.end = now - p.first_arrival;
  p.recording = false;
  const int last_bit = transport_.shortcuts().rounding_ties() == p.ties_before ? kAnyLastBit : p.last_bit;
  ReuseKey key{members[0].shape, p.perturbation_epoch, p.shift_domain, last_bit, members[0].arrival};
  reuse.store_period(std::move(key), std::move(p.record));
  ++reuse.stats().recorded;
}

// The head's last arrival with a period record for its key: as commit_replay, and from
// now until the period's end the replay holds the network.
void ScheduledExecution::commit_period_replay(const PeriodRecord& record) {
  auto& w = watch_;
  if (!w.candidate || !isolated() || (w.period && w.period->record.members.size() > 1)) {
    w.candidate = false;
    return;
  }
  const auto self = shared_from_this();
  const double end = w.first_arrival + record.end;
  const auto& head = record.members[0];
  if (!take_over(end, head.done)) return;
  // A message sent at the end instant meets none of the period's: they hold no link then.
  transport_.shortcuts().guard_replay(this, *w.reuse, w.shape, end, false);
  auto replay = std::make_shared<PeriodReplay>();
  replay->record = &record;
  replay->head_shape = w.shape;
  replay->first_arrival = w.first_arrival;
  replay->end = end;
  w.reuse->period_replay() = replay;
  finish_at_recorded_times(head.done, head.order, w.first_arrival, false);
  // A member that has not come by the end: the recorded times assumed its traffic.
  transport_.engine().call_at(end, [self, replay] {
    if (!replay->complete()) self->period_conflict(*replay);
  });
}

// A rank of a later member of the replayed period: it must arrive at the recorded time;
// once all have, they finish at the recorded times. No message is sent.
void ScheduledExecution::arrive_replayed(int rank) {
  auto& replay = *watch_.replay;
  const auto& m = replay.record->members[static_cast<std::size_t>(watch_.member)];
  const double now = transport_.engine().now();
  if (!transport_.engine().time_grid().on_grid(now) || now - replay.first_arrival != m.arrival[rank])
    period_conflict(replay);
  if (watch_.arrived < schedule_->size()) return;
  --replay.arriving;
  finish_at_recorded_times(m.done, m.order, replay.first_arrival, false);
}

void ScheduledExecution::period_conflict(const PeriodReplay& replay) {
  const std::string shape = replay.head_shape;
  watch_.reuse->forbid(shape);
  watch_.reuse->period_replay().reset();
  throw ReuseConflict(shape);
}

// Done and alone from start to end: the record later collectives with this key replay.
void ScheduledExecution::maybe_record() {
  auto& w = watch_;
  if (w.recorded || w.replayed || w.done < schedule_->size() || in_flight_ > 0) return;
  w.recorded = true;
  w.candidate = false;
  const double now = transport_.engine().now();
  if (transport_.engine().time_grid().shift_domain(now) != w.shift_domain) return;
  ReuseRecord record;
  record.done = w.done_at;
  record.order = w.order;
  record.end = now - w.first_arrival;
  record.same_instant = std::all_of(w.done_at.begin(), w.done_at.end(), [&](double d) { return d == record.end; });
  if (!isolated(record.same_instant)) return;
  ReuseKey key = reuse_key();
  if (transport_.shortcuts().rounding_ties() == w.ties_before) key.last_bit = kAnyLastBit;
  w.reuse->store(std::move(key), std::move(record));
  ++w.reuse->stats().recorded;
}

ClosedFormExecution::ClosedFormExecution(sim::Engine& engine, int ranks, CollectiveTiming timing, RankDone done,
                                         std::shared_ptr<CollectiveStream> stream)
    : engine_(engine), timing_(timing), done_(std::move(done)), stream_(std::move(stream)), ranks_(ranks) {}

void ClosedFormExecution::arrive(int) {
  if (++arrived_ < ranks_) return;
  if (stream_) return stream_->submit(timing_, ranks_, std::move(done_));
  const double finish = engine_.after(timing_.seconds);
  for (int r = 0; r < ranks_; ++r) engine_.call_at(finish, [done = done_, r] { done(r); });
}

CollectiveStream::CollectiveStream(sim::Engine& engine, std::shared_ptr<PortFlows> ports)
    : engine_(engine), ports_(std::move(ports)) {
  if (!ports_) throw std::invalid_argument("CollectiveStream: expected the machine's ports");
}

void CollectiveStream::submit(CollectiveTiming timing, int ranks, Execution::RankDone done) {
  waiting_.push_back({timing, ranks, std::move(done)});
  if (!running_) start_next();
}

void CollectiveStream::start_next() {
  if (waiting_.empty()) return;
  running_ = true;
  started_at_ = engine_.now();
  const CollectiveTiming& t = waiting_.front().timing;
  if (t.wire_s > 0) return ports_->start_everywhere(t.wire_s, *this, 0);
  engine_.call_at(engine_.after(t.seconds), [this] { finish(); });  // latency only: no port held
}

void CollectiveStream::transfer_done(std::uint64_t) {
  // Its latencies follow its data: it ends its own time after it started, later by what
  // sharing the ports added to its data's time (nothing alone, so alone it ends exactly
  // its own time after it started, on the engine's grid as the transfer's end is).
  const CollectiveTiming& t = waiting_.front().timing;
  const sim::TimeGrid& grid = engine_.time_grid();
  const double delay = engine_.now() - grid.later(started_at_, t.wire_s);
  engine_.call_at(std::max(engine_.now(), grid.later(started_at_, t.seconds) + delay), [this] { finish(); });
}

void CollectiveStream::finish() {
  Waiting ended = std::move(waiting_.front());
  waiting_.pop_front();
  running_ = false;
  for (int r = 0; r < ended.ranks; ++r) engine_.call_at(engine_.now(), [done = ended.done, r] { done(r); });
  start_next();
}

void ScheduledExecution::abandon() {
  if (wavefront_) release_links();
  transport_.cancel(*this);
  in_flight_ = 0;
  self_while_in_flight_.reset();
}

namespace {

struct PastDeadline {};

// simulate() and simulate_before(): nullopt when `deadline` passed with a rank not done.
std::optional<std::vector<double>> run_alone(const NetworkModel& model, const Topology& topology,
                                             const Schedule& schedule, const std::vector<double>& arrival,
                                             const Perturbations& perturbations, bool evaluate_rings,
                                             sim::TimeGrid grid, double deadline) {
  if (model.closed_form_collectives)
    throw std::invalid_argument(fmt::format("simulate: the {} model's collectives are closed forms, not schedules",
                                            model.name));
  sim::Engine engine(grid);
  auto transport = model.make_transport(engine, topology, perturbations);
  transport->shortcuts().evaluate_rings(evaluate_rings && model.rings_as_recurrence);
  std::vector<double> finish(schedule.size(), -1.0);
  int done = 0;
  auto exec = std::make_shared<ScheduledExecution>(*transport, std::make_shared<const Schedule>(schedule),
                                                   [&](int r) {
                                                     finish[r] = engine.now();
                                                     ++done;
                                                   });
  exec->alone_on_its_engine();
  // Scheduled before anything else, so it fires before every other event at the
  // deadline, and no earlier event sees it: until then the run is simulate()'s.
  if (deadline < std::numeric_limits<double>::infinity())
    engine.call_at(deadline, [&] {
      if (done < schedule.size()) throw PastDeadline{};
    });
  for (int r = 0; r < schedule.size(); ++r) engine.call_at(arrival.at(r), [exec, r] { exec->arrive(r); });
  try {
    engine.run();
  } catch (const PastDeadline&) {
    exec->abandon();
    return std::nullopt;
  }
  for (int r = 0; r < schedule.size(); ++r)
    if (finish[r] < 0) throw std::logic_error(fmt::format("{}: rank {} never finished", schedule.name, r));
  return finish;
}

}  // namespace

std::vector<double> simulate(const NetworkModel& model, const Topology& topology, const Schedule& schedule,
                             const std::vector<double>& arrival, const Perturbations& perturbations,
                             bool evaluate_rings, sim::TimeGrid grid) {
  return *run_alone(model, topology, schedule, arrival, perturbations, evaluate_rings, grid,
                    std::numeric_limits<double>::infinity());
}

std::optional<std::vector<double>> simulate_before(double deadline, const NetworkModel& model,
                                                   const Topology& topology, const Schedule& schedule,
                                                   const std::vector<double>& arrival, sim::TimeGrid grid) {
  return run_alone(model, topology, schedule, arrival, {}, true, grid, deadline);
}

std::vector<double> simulate(const std::string& model, const Topology& topology, const Schedule& schedule,
                             const std::vector<double>& arrival, const Perturbations& perturbations,
                             bool evaluate_rings) {
  return simulate(network_model(model), topology, schedule, arrival, perturbations, evaluate_rings);
}

}  // namespace dtsim::net
