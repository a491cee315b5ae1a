// comm::TraceRecorder: writes a rank's OpTrace (comm/op_trace.hpp) as the rank runs —
// operations with their sizes, compute seconds, waits, phases and the training loop's
// marks. Two communicators record through it: the timing-only mode's representative
// rank (comm/representative.hpp) and RecordingCommunicator (comm/recording.hpp), which
// records a live rank for `dtsim compare` to replay on the network model.
//
// It listens to the rank's PhaseTimer; after TraceMark::End nothing more is recorded
// (the run's closing reductions are not part of what is timed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "comm/op_trace.hpp"
#include "comm/phase_timer.hpp"

namespace dtsim::comm {

class TraceRecorder : public PhaseTimer::Listener {
 public:
  // `neighbours`: the rank's gossip neighbours (net::Topology::neighbors), the slots
  // peers are recorded as. `who`: what records, for error messages ("timing-only mode").
  TraceRecorder(int rank, int ranks, std::vector<int> neighbours, std::string who);

  void phase_begin(std::size_t index, const std::string& name) override;
  void phase_end(std::size_t index) override;
  // Marks a point of the training loop; `value` is what the loop knows there and the
  // trace keeps (StepEnd: the step's n_bits).
  virtual void mark(TraceMark mark, std::int64_t value = 0);

  const OpTrace& trace() const { return trace_; }
  bool recording() const { return recording_; }

 protected:
  // Records an operation (numbered in issue order, recorded or not); returns its number.
  std::uint64_t record_op(TracedOp op);
  void record_wait(std::uint64_t op);
  // A tensor operation of `kind` on `tensor`'s dtype and element count.
  static TracedOp tensor_op(TracedOp::Kind kind, const at::Tensor& tensor, bool stream = false);
  // `peer`'s position among this rank's gossip neighbours; throws naming `op` if it is none.
  int slot_of(int peer, const char* op) const;

 private:
  OpTrace trace_;
  std::vector<int> neighbours_;
  std::string who_;
  bool recording_ = true;
};

}  // namespace dtsim::comm
