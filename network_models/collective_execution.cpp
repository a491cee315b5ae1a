#include "network_models/collective_execution.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net {

ScheduledExecution::ScheduledExecution(Transport& transport, std::shared_ptr<const Schedule> schedule, RankDone done)
    : transport_(transport), schedule_(std::move(schedule)), done_(std::move(done)) {
  if (schedule_->size() != transport_.topology().size())
    throw std::invalid_argument(fmt::format("{} schedule for {} ranks on a {}-rank topology", schedule_->name,
                                            schedule_->size(), transport_.topology().size()));
  state_.resize(schedule_->size());
  for (int r = 0; r < schedule_->size(); ++r) {
    state_[r].resize(schedule_->lane_count(r));
    lanes_left_.push_back(schedule_->lane_count(r));
  }
}

void ScheduledExecution::arrive(int rank) {
  if (lanes_left_.at(rank) == 0) {
    done_(rank);
    return;
  }
  for (int lane = 0; lane < static_cast<int>(state_[rank].size()); ++lane) {
    state_[rank][lane].started = true;
    start_step(rank, lane);
  }
}

void ScheduledExecution::start_step(int rank, int lane) {
  auto& st = state_[rank][lane];
  if (st.step == schedule_->step_count(rank, lane)) {
    if (--lanes_left_[rank] == 0) done_(rank);
    return;
  }
  const Step& step = schedule_->step(rank, lane, st.step, scratch_);
  st.pending_sends = static_cast<int>(step.sends.size());
  st.pending_receives = 0;
  for (int peer : step.receives) {
    int& early = st.mailbox[peer];
    if (early > 0) {
      --early;
    } else {
      ++st.waiting[peer];
      ++st.pending_receives;
    }
  }
  auto self = shared_from_this();
  for (const auto& t : step.sends)
    transport_.send(rank, t.peer, t.bytes, [self, rank, lane, peer = t.peer] {
      self->deliver(peer, lane, rank);
      --self->state_[rank][lane].pending_sends;
      self->maybe_advance(rank, lane);
    });
  maybe_advance(rank, lane);
}

void ScheduledExecution::deliver(int to, int lane, int from) {
  auto& st = state_[to][lane];
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
  auto& st = state_[rank][lane];
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

std::vector<double> simulate(const std::string& model, const Topology& topology, const Schedule& schedule,
                             const std::vector<double>& arrival, const Perturbations& perturbations) {
  sim::Engine engine;
  auto transport = make_transport(model, engine, topology, perturbations);
  std::vector<double> finish(schedule.size(), -1.0);
  auto exec = std::make_shared<ScheduledExecution>(*transport, std::make_shared<const Schedule>(schedule),
                                                   [&](int r) { finish[r] = engine.now(); });
  for (int r = 0; r < schedule.size(); ++r) engine.call_at(arrival.at(r), [exec, r] { exec->arrive(r); });
  engine.run();
  for (int r = 0; r < schedule.size(); ++r)
    if (finish[r] < 0) throw std::logic_error(fmt::format("{}: rank {} never finished", schedule.name, r));
  return finish;
}

}  // namespace dtsim::net
