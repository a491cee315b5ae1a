// comm::RecordingCommunicator: any communicator, recording what its rank does as an
// OpTrace — the input of a trace-driven prediction. `dtsim compare` records every live
// rank this way and replays the traces on the calibrated network model
// (comm/trace_replay.hpp), so the prediction uses the compute each rank really spent and
// its error is the network model's alone.
//
// Every second of the rank's clock is one of three things: inside compute() (recorded
// as that compute), issuing or awaiting an operation (the network's part, which the
// replay predicts), or between those — the host's own work outside compute() (loop
// overhead, copies an algorithm makes itself, data loading), recorded as compute too,
// as trace-driven simulators record the CPU bursts between communication calls.
// On an emulated communicator nothing passes between calls, so a recorded emulated run
// replays to the same times. Results, traffic and compute_seconds() are the wrapped
// communicator's own.
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "comm/trace_recorder.hpp"

namespace dtsim::comm {

class RecordingCommunicator final : public Communicator, public TraceRecorder {
 public:
  // `neighbours`: the rank's gossip neighbours, the slots peers are recorded as.
  RecordingCommunicator(Communicator& inner, std::vector<int> neighbours);

  std::string backend() const override { return inner_.backend(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  double now() const override { return inner_.now(); }

  Op compute(const sim::ComputeCost& cost, const std::function<void()>& work) override;
  Op all_reduce(at::Tensor& tensor, ReduceOp op) override;
  Op all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) override;
  Op exchange(const at::Tensor& send, std::span<const int> peers, std::vector<at::Tensor>& received) override;
  Op send(const at::Tensor& tensor, int peer) override;
  Op recv(at::Tensor& tensor, int peer) override;
  Op broadcast(at::Tensor& tensor, int root) override;
  Op stream_all_reduce(at::Tensor& tensor, ReduceOp op) override;
  Op stream_all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) override;

  void phase_begin(std::size_t index, const std::string& name) override;
  void phase_end(std::size_t index) override;
  void mark(TraceMark mark, std::int64_t value = 0) override;

  // Seconds recorded as host work outside compute() so far.
  double host_seconds() const { return host_seconds_; }

  // Called by the operations' handles around a wait.
  void begin_wait(std::uint64_t op);
  void end_wait();

 private:
  // Records the clock's advance since the last call returned as host compute.
  void record_host_time();
  // Records `traced`, issued as `inner_op` (awaited at once when `complete`); the wrapped
  // communicator's counters are copied.
  Op recorded(TracedOp traced, Op inner_op, bool complete = false);

  Communicator& inner_;
  double last_ = 0.0;  // the clock when the last communicator call returned
  double host_seconds_ = 0.0;
};

}  // namespace dtsim::comm
