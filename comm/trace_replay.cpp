#include "comm/trace_replay.hpp"
#include "config/scenario_error.hpp"

#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

namespace dtsim::comm {

namespace {

at::Tensor size_only(std::int64_t numel, at::ScalarType dtype) {
  return at::empty({numel}, at::TensorOptions().device(at::kMeta).dtype(dtype));
}

// The operations issued and not yet awaited, by number. A rank awaits them about in the
// order it issued them, so they live in a window from the oldest one not awaited to
// the newest: issuing appends, awaiting takes one out and drops the awaited ones at the
// front. A hash map cost a node allocation and two lookups per operation, a good share
// of replaying thousands of ranks' steps. One never awaited would hold the window open
// for the rest of the trace, so the window's oldest move to a map once it is long.
class OpsInFlight {
 public:
  std::uint64_t next_id() const { return first_ + window_.size(); }
  // Numbers an operation the replay awaits at once, without keeping it.
  void issue_awaited() {
    if (window_.empty()) ++first_;
    else window_.emplace_back(std::nullopt);
  }
  std::uint64_t issue(Op op) {
    window_.emplace_back(std::move(op));
    if (window_.size() > kMaxWindow) {
      stragglers_.emplace(first_, std::move(*window_.front()));  // the front is never an awaited one
      drop_front();
      while (!window_.empty() && !window_.front()) drop_front();
    }
    return next_id() - 1;
  }
  // Operation `id`, taken out; none if it was not issued, or awaited already.
  std::optional<Op> take(std::uint64_t id) {
    if (id < first_) {
      auto it = stragglers_.find(id);
      if (it == stragglers_.end()) return std::nullopt;
      std::optional<Op> op = std::move(it->second);
      stragglers_.erase(it);
      return op;
    }
    if (id - first_ >= window_.size()) return std::nullopt;
    std::optional<Op> op = std::exchange(window_[id - first_], std::nullopt);
    while (!window_.empty() && !window_.front()) drop_front();
    return op;
  }

 private:
  static constexpr std::size_t kMaxWindow = 1024;
  void drop_front() {
    window_.pop_front();
    ++first_;
  }
  std::deque<std::optional<Op>> window_;  // operation first_ + i at i; empty once awaited
  std::uint64_t first_ = 0;
  std::unordered_map<std::uint64_t, Op> stragglers_;  // issued before first_, not awaited yet
};

}  // namespace

sim::ComputeCost replay_cost(double seconds) { return {.flops = seconds, .bytes = 0.0}; }

// seconds = flops / 1 + 0 / inf: exactly the recorded seconds.
sim::ComputeModel replay_compute_model() {
  return {.flops_per_s = 1.0, .bytes_per_s = std::numeric_limits<double>::infinity()};
}

sim::Task<ReplayRecord> replay_trace(Communicator& comm, const OpTrace& trace, std::vector<int> neighbours,
                                     PhaseTimer& timer) {
  if (comm.size() != trace.ranks)
    throw config::InputError(
        fmt::format("replay: the trace is of a {}-rank job, the communicator's has {}", trace.ranks, comm.size()));
  auto peer = [&](int slot) {
    if (slot < 0 || static_cast<std::size_t>(slot) >= neighbours.size())
      throw config::InputError(fmt::format(
          "replay: rank {} has {} gossip neighbours, but the trace it replays (recorded on rank {}) sends to "
          "neighbour #{}: the topology must give each rank at least as many neighbours as the recording had",
          comm.rank(), neighbours.size(), trace.rank, slot + 1));
    return neighbours[static_cast<std::size_t>(slot)];
  };

  ReplayRecord record;
  OpsInFlight in_flight;
  // Output lists of gathers and exchanges in flight: the backend writes them on completion.
  std::unordered_map<std::uint64_t, std::vector<at::Tensor>> outputs;
  std::deque<PhaseTimer::Scope> open_phases;  // constructed in place, never moved
  constexpr std::size_t kUnresolved = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> phase_index(trace.phase_names.size(), kUnresolved);  // the timer's, by the trace's
  double step_start = 0.0, compute_before = 0.0, eval_start = 0.0, evaluating = 0.0;
  Traffic traffic_before;

  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const TracedOp& t = trace.ops[i];
    using Kind = TracedOp::Kind;
    switch (t.kind) {
      case Kind::Compute: {
        Op op = comm.compute(replay_cost(t.seconds), [] {});
        // Nearly every compute is awaited at once: then it is awaited here, the wait
        // skipped, and the window of operations in flight never holds it.
        const TracedOp* next = i + 1 < trace.ops.size() ? &trace.ops[i + 1] : nullptr;
        if (next && next->kind == Kind::Wait && next->op == in_flight.next_id()) {
          in_flight.issue_awaited();
          ++i;
          co_await op;
        } else {
          in_flight.issue(std::move(op));
        }
        break;
      }
      case Kind::AllReduce: {
        at::Tensor tensor = size_only(t.numel, t.dtype);
        const auto op = static_cast<ReduceOp>(t.variant);
        in_flight.issue(t.stream ? comm.stream_all_reduce(tensor, op) : comm.all_reduce(tensor, op));
        break;
      }
      case Kind::AllGather: {
        // Numbered before it is issued: the backend writes the list on completion.
        auto& out = outputs[in_flight.next_id()];
        const at::Tensor block = size_only(t.numel, t.dtype);
        in_flight.issue(t.stream ? comm.stream_all_gather(block, out) : comm.all_gather(block, out));
        break;
      }
      case Kind::Broadcast: {
        at::Tensor tensor = size_only(t.numel, t.dtype);
        in_flight.issue(comm.broadcast(tensor, t.variant));
        break;
      }
      case Kind::Exchange: {
        std::vector<int> peers;
        for (int slot : t.peer_slots) peers.push_back(peer(slot));
        auto& out = outputs[in_flight.next_id()];
        in_flight.issue(comm.exchange(size_only(t.numel, t.dtype), peers, out));
        break;
      }
      case Kind::Send:
        in_flight.issue(comm.send(size_only(t.numel, t.dtype), peer(t.variant)));
        break;
      case Kind::Recv: {
        at::Tensor tensor = size_only(t.numel, t.dtype);
        in_flight.issue(comm.recv(tensor, peer(t.variant)));
        break;
      }
      case Kind::Wait: {
        std::optional<Op> op = in_flight.take(t.op);
        if (!op)
          throw config::InputError(fmt::format(
              "replay: operation #{} awaited, but it is not in flight (not issued yet, or awaited already)", t.op));
        co_await *op;
        if (!outputs.empty()) outputs.erase(t.op);
        break;
      }
      case Kind::PhaseBegin: {
        const auto name = static_cast<std::size_t>(t.variant);
        std::size_t& index = phase_index.at(name);
        if (index == kUnresolved) index = timer.index_of(trace.phase_names[name]);
        open_phases.emplace_back(timer, index);
        break;
      }
      case Kind::PhaseEnd:
        if (open_phases.empty()) throw config::InputError("replay: a phase ends that never began");
        open_phases.pop_back();
        break;
      case Kind::Mark:
        switch (static_cast<TraceMark>(t.variant)) {
          case TraceMark::StepBegin:
            step_start = comm.now();
            compute_before = comm.compute_seconds();
            traffic_before = comm.traffic();
            break;
          case TraceMark::StepEnd:
            record.step_time_s.push_back(comm.now() - step_start);
            record.compute_time_s.push_back(comm.compute_seconds() - compute_before);
            record.wire_bytes.push_back(static_cast<double>(comm.traffic().wire_bytes - traffic_before.wire_bytes));
            record.calls.push_back(static_cast<double>(comm.traffic().calls - traffic_before.calls));
            record.n_bits.push_back(static_cast<double>(t.numel));
            record.phase_s.push_back(timer.take_step());
            break;
          case TraceMark::EvalBegin:
            eval_start = comm.now();
            record.eval_time_s.push_back(eval_start - evaluating);
            break;
          case TraceMark::EvalEnd: evaluating += comm.now() - eval_start; break;
          case TraceMark::End: record.end_time_s = comm.now() - evaluating; break;
        }
        break;
    }
  }
  co_return record;
}

}  // namespace dtsim::comm
