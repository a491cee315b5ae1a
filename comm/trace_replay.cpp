#include "comm/trace_replay.hpp"
#include "config/scenario_error.hpp"

#include <limits>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

namespace dtsim::comm {

namespace {

at::Tensor size_only(std::int64_t numel, at::ScalarType dtype) {
  return at::empty({numel}, at::TensorOptions().device(at::kMeta).dtype(dtype));
}

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
  std::uint64_t next_op = 0;
  std::unordered_map<std::uint64_t, Op> in_flight;
  // Output lists of gathers and exchanges in flight: the backend writes them on completion.
  std::unordered_map<std::uint64_t, std::vector<at::Tensor>> outputs;
  std::vector<std::unique_ptr<PhaseTimer::Scope>> open_phases;
  double step_start = 0.0, compute_before = 0.0, eval_start = 0.0, evaluating = 0.0;
  Traffic traffic_before;

  for (const TracedOp& t : trace.ops) {
    using Kind = TracedOp::Kind;
    switch (t.kind) {
      case Kind::Compute:
        in_flight.emplace(next_op++, comm.compute(replay_cost(t.seconds), [] {}));
        break;
      case Kind::AllReduce: {
        at::Tensor tensor = size_only(t.numel, t.dtype);
        const auto op = static_cast<ReduceOp>(t.variant);
        in_flight.emplace(next_op++, t.stream ? comm.stream_all_reduce(tensor, op) : comm.all_reduce(tensor, op));
        break;
      }
      case Kind::AllGather: {
        const std::uint64_t id = next_op++;
        auto& out = outputs[id];
        const at::Tensor block = size_only(t.numel, t.dtype);
        in_flight.emplace(id, t.stream ? comm.stream_all_gather(block, out) : comm.all_gather(block, out));
        break;
      }
      case Kind::Broadcast: {
        at::Tensor tensor = size_only(t.numel, t.dtype);
        in_flight.emplace(next_op++, comm.broadcast(tensor, t.variant));
        break;
      }
      case Kind::Exchange: {
        const std::uint64_t id = next_op++;
        std::vector<int> peers;
        for (int slot : t.peer_slots) peers.push_back(peer(slot));
        in_flight.emplace(id, comm.exchange(size_only(t.numel, t.dtype), peers, outputs[id]));
        break;
      }
      case Kind::Send:
        in_flight.emplace(next_op++, comm.send(size_only(t.numel, t.dtype), peer(t.variant)));
        break;
      case Kind::Recv: {
        at::Tensor tensor = size_only(t.numel, t.dtype);
        in_flight.emplace(next_op++, comm.recv(tensor, peer(t.variant)));
        break;
      }
      case Kind::Wait: {
        auto it = in_flight.find(t.op);
        if (it == in_flight.end())
          throw config::InputError(fmt::format("replay: operation #{} awaited before it was issued", t.op));
        co_await it->second;
        in_flight.erase(it);
        outputs.erase(t.op);
        break;
      }
      case Kind::PhaseBegin:
        // new from the prvalue: Scope is neither copyable nor movable.
        open_phases.emplace_back(new PhaseTimer::Scope(timer.phase(trace.phase_names.at(static_cast<std::size_t>(t.variant)))));
        break;
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
