#include "network_models/collective_execution.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net {

ScheduledExecution::ScheduledExecution(Transport& transport, std::shared_ptr<const Schedule> schedule, RankDone done,
                                       CollectiveReuse* reuse, std::string shape)
    : transport_(transport), schedule_(std::move(schedule)), done_(std::move(done)) {
  watch_.reuse = reuse;
  watch_.shape = std::move(shape);
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
  if (watch_.reuse) {
    if (watch_.arrived++ == 0) watch_first_arrival();
    if (watch_.candidate) watch_.arrival[rank] = transport_.engine().now() - watch_.first_arrival;
  }
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

void ScheduledExecution::finish(int rank) {
  if (watch_.reuse) {
    ++watch_.done;
    watch_.done_at[rank] = transport_.engine().now() - watch_.first_arrival;
    watch_.order.push_back(rank);
  }
  done_(rank);
  if (watch_.candidate) maybe_record();
}

// ---- Collective reuse (collective_reuse.hpp) ----

void ScheduledExecution::watch_first_arrival() {
  auto& w = watch_;
  const double now = transport_.engine().now();
  ++w.reuse->stats().collectives;
  // Times in one binade shift exactly (normal, positive); flows in flight would share
  // the links (the flow model); jitter draws would be consumed differently.
  w.candidate = w.reuse->allowed(w.shape) && std::isnormal(now) && now > 0 && !transport_.jitters() &&
                (!transport_.messages_interact() ||
                 transport_.messages_in_flight() == transport_.messages_being_delivered());
  w.first_arrival = now;
  w.binade = std::ilogb(now);
  w.perturbation_epoch = transport_.perturbation_epoch();
  w.sends_before = transport_.messages_sent();
  const auto n = static_cast<std::size_t>(schedule_->size());
  w.arrival.assign(n, std::numeric_limits<double>::quiet_NaN());
  w.done_at.assign(n, std::numeric_limits<double>::quiet_NaN());
}

bool ScheduledExecution::isolated(bool but_now) const {
  if (transport_.perturbation_epoch() != watch_.perturbation_epoch) return false;
  if (!transport_.messages_interact()) return true;
  if (!but_now) return transport_.messages_sent() - watch_.sends_before == watch_.own_sends;
  return watch_.last_own_send < transport_.engine().now() &&
         transport_.messages_sent_before_now() - watch_.sends_before == watch_.own_sends;
}

ReuseKey ScheduledExecution::reuse_key() const {
  return {watch_.shape, watch_.perturbation_epoch, watch_.binade, watch_.arrival};
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
  const ReuseRecord* record = watch_.reuse->find(reuse_key());
  if (!record) return;  // still a candidate: recorded when done
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
  const double end = w.first_arrival + record.end;
  if (std::ilogb(end) != w.binade || transport_.next_perturbation_at_or_after(w.first_arrival) <= end) return;
  for (int r = 0; r < schedule_->size(); ++r)
    if (!std::isnan(w.done_at[r]) && w.done_at[r] != record.done[r]) return;
  w.candidate = false;
  w.replayed = true;
  ++w.reuse->stats().replayed;
  auto self = shared_from_this();
  transport_.cancel(*this);
  in_flight_ = 0;
  self_while_in_flight_.reset();
  if (transport_.messages_interact()) transport_.guard_replay(this, *w.reuse, w.shape, end, !record.same_instant);
  for (int r : record.order) {
    if (!std::isnan(w.done_at[r])) continue;  // done before the last arrival, at the recorded time
    transport_.engine().call_at(w.first_arrival + record.done[r], [self, r] {
      self->finish(r);
      if (self->watch_.done == self->schedule_->size()) self->transport_.end_replay_guard(self.get());
    });
  }
}

// Done and alone from start to end: the record later collectives with this key replay.
void ScheduledExecution::maybe_record() {
  auto& w = watch_;
  if (w.recorded || w.replayed || w.done < schedule_->size() || in_flight_ > 0) return;
  w.recorded = true;
  w.candidate = false;
  const double now = transport_.engine().now();
  if (std::ilogb(now) != w.binade) return;
  ReuseRecord record;
  record.done = w.done_at;
  record.order = w.order;
  record.end = now - w.first_arrival;
  record.same_instant = std::all_of(w.done_at.begin(), w.done_at.end(), [&](double d) { return d == record.end; });
  if (!isolated(record.same_instant)) return;
  w.reuse->store(reuse_key(), std::move(record));
  ++w.reuse->stats().recorded;
}

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
  deliver(peer, lane, rank);
  --state(rank, lane).pending_sends;
  maybe_advance(rank, lane);
  if (watch_.candidate && in_flight_ == 0) maybe_record();
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

ClosedFormExecution::ClosedFormExecution(sim::Engine& engine, int ranks, double seconds, RankDone done)
    : engine_(engine), seconds_(seconds), done_(std::move(done)), ranks_(ranks) {}

void ClosedFormExecution::arrive(int) {
  last_ = engine_.now();
  if (++arrived_ < ranks_) return;
  const double finish = last_ + seconds_;
  for (int r = 0; r < ranks_; ++r) engine_.call_at(finish, [done = done_, r] { done(r); });
}

std::vector<double> simulate(const NetworkModel& model, const Topology& topology, const Schedule& schedule,
                             const std::vector<double>& arrival, const Perturbations& perturbations) {
  if (model.closed_form_collectives)
    throw std::invalid_argument(fmt::format("simulate: the {} model's collectives are closed forms, not schedules",
                                            model.name));
  sim::Engine engine;
  auto transport = model.make_transport(engine, topology, perturbations);
  std::vector<double> finish(schedule.size(), -1.0);
  auto exec = std::make_shared<ScheduledExecution>(*transport, std::make_shared<const Schedule>(schedule),
                                                   [&](int r) { finish[r] = engine.now(); });
  for (int r = 0; r < schedule.size(); ++r) engine.call_at(arrival.at(r), [exec, r] { exec->arrive(r); });
  engine.run();
  for (int r = 0; r < schedule.size(); ++r)
    if (finish[r] < 0) throw std::logic_error(fmt::format("{}: rank {} never finished", schedule.name, r));
  return finish;
}

std::vector<double> simulate(const std::string& model, const Topology& topology, const Schedule& schedule,
                             const std::vector<double>& arrival, const Perturbations& perturbations) {
  return simulate(network_model(model), topology, schedule, arrival, perturbations);
}

}  // namespace dtsim::net
