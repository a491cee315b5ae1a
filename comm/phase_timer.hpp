// comm::PhaseTimer: per-step timing of named phases on a rank's clock (simulated or
// measured), the reference code's `timer(label)` context manager as a scope guard:
//
//   { auto scope = timer.phase("sync/sync"); co_await comm.all_reduce(buf, Average); }
//
// Reading the clock never suspends, so a scope may span co_awaits.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.hpp"
#include "sim/trace_writer.hpp"

namespace dtsim::comm {

class PhaseTimer {
 public:
  explicit PhaseTimer(const Communicator& comm) : comm_(&comm) {}

  // Told when a phase scope opens and closes (the timing-only mode's recorder writes
  // them into the representative rank's trace, to replay them on every rank).
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void phase_begin(std::size_t index, const std::string& name) = 0;
    virtual void phase_end(std::size_t index) = 0;
  };

  class Scope {
   public:
    Scope(PhaseTimer& timer, std::size_t index) : timer_(&timer), index_(index), start_(timer.comm_->now()) {
      if (timer_->listener_) timer_->listener_->phase_begin(index_, timer_->names_[index_]);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      const double end = timer_->comm_->now();
      timer_->current_[index_] += end - start_;
      if (timer_->trace_) timer_->trace_->complete(timer_->track_, timer_->names_[index_], start_, end);
      if (timer_->listener_) timer_->listener_->phase_end(index_);
    }

   private:
    PhaseTimer* timer_;
    std::size_t index_;
    double start_;
  };

  // Times the enclosing scope under `name` (accumulated if the name repeats in a step).
  // `name`: lowercase words, a '/' between the group and the step ("sync/compress",
  // "forward_pass"); std::logic_error otherwise.
  Scope phase(std::string_view name);
  // The index of phase `name` (a new one if it is new), for Scope(timer, index): a
  // replay that opens the same phases millions of times looks each up once.
  std::size_t index_of(std::string_view name);

  // Also record every phase as a span on `track` of `trace` (a timeline for Perfetto).
  void record_to(sim::TraceWriter* trace, sim::TraceWriter::TrackId track) {
    trace_ = trace;
    track_ = track;
  }

  void notify(Listener* listener) { listener_ = listener; }

  // Phase names in order of first use.
  const std::vector<std::string>& names() const { return names_; }
  // Seconds spent in each phase (indexed like names()) since the last take_step().
  std::vector<double> take_step();

 private:
  const Communicator* comm_;
  std::vector<std::string> names_;
  std::vector<double> current_;
  sim::TraceWriter* trace_ = nullptr;
  sim::TraceWriter::TrackId track_{0};
  Listener* listener_ = nullptr;
};

}  // namespace dtsim::comm
