#include "network_models/collective_execution.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net {

ScheduledExecution::ScheduledExecution(Transport& transport, std::shared_ptr<const Schedule> schedule, RankDone done)
    : transport_(transport), schedule_(std::move(schedule)), done_(std::move(done)) {
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
  if (lanes_left_.at(rank) == 0) {
    done_(rank);
    return;
  }
  for (int lane = 0; lane < first_lane_[rank + 1] - first_lane_[rank]; ++lane) {
    state(rank, lane).started = true;
    start_step(rank, lane);
  }
}

void ScheduledExecution::start_step(int rank, int lane) {
  auto& st = state(rank, lane);
  if (st.step == schedule_->step_count(rank, lane)) {
    if (--lanes_left_[rank] == 0) done_(rank);
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
