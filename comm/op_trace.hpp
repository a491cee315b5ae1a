// comm::OpTrace: what one rank did to its Communicator, in program order, with sizes
// but no data — the input of the timing-only mode. A representative rank runs the
// algorithm's real kernels once (comm/representative.hpp records its trace); every rank
// of a large job then replays that trace on the emulated network with size-only tensors
// (comm/trace_replay.hpp), so memory does not grow with the rank count.
//
// Operations are numbered in issue order (compute phases included); a Wait names the
// operation the rank awaited at that point, which is what orders a rank's operations in
// time. Peers are stored as positions in the rank's gossip-neighbour list, so the trace
// maps onto any rank of a topology (on a ring of n, rank 0's [1, n-1] is rank r's
// [r-1, r+1]).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::comm {

// Points of the training loop the replay measures between.
enum class TraceMark : int { StepBegin, StepEnd, EvalBegin, EvalEnd, End };

struct TracedOp {
  enum class Kind : std::uint8_t {
    // Operations (each takes the next operation number):
    Compute, AllReduce, AllGather, Broadcast, Exchange, Send, Recv,
    // Not operations:
    Wait, PhaseBegin, PhaseEnd, Mark
  };
  Kind kind = Kind::Compute;
  bool stream = false;                // a stream collective (Communicator::stream_*)
  at::ScalarType dtype = at::kFloat;  // the tensor's element type
  // AllReduce: the ReduceOp; Broadcast: the root; Send/Recv: the peer's neighbour slot;
  // PhaseBegin/PhaseEnd: the phase's index in OpTrace::phase_names; Mark: a TraceMark.
  int variant = 0;
  std::int64_t numel = 0;  // elements sent (all-gather: this rank's block); StepEnd mark: the step's n_bits
  double seconds = 0.0;    // Compute: the representative rank's duration (no straggler slowdown)
  std::uint64_t op = 0;    // Wait: the operation awaited
  std::vector<int> peer_slots;  // Exchange: the peers, as neighbour slots
};

struct OpTrace {
  int rank = 0;   // the representative rank
  int ranks = 1;  // the job's size
  std::vector<TracedOp> ops;
  std::vector<std::string> phase_names;
  std::uint64_t operations = 0;  // operations issued (the next operation number)
};

// A compact binary form (MessagePack) for sending a trace to another process, and back;
// from_bytes throws std::invalid_argument on bytes that are not a trace, one line starting
// "not an operation trace: " and naming the byte offset, the field (/ranks) or the entry
// (entry #3: ...). It checks everything the replay acts on (kinds, types, ranges,
// reductions, roots, phases, marks) and refuses nesting deeper than a trace has (nlohmann's
// MessagePack reader recurses per level: a few hundred KB of 0x91 would overflow the stack).
std::vector<std::uint8_t> to_bytes(const OpTrace& trace);
OpTrace op_trace_from_bytes(const std::vector<std::uint8_t>& bytes);

}  // namespace dtsim::comm
