// comm::RepresentativeCommunicator: one rank of a job run alone, as if every other rank
// held the same data it holds — the recording half of the timing-only mode.
//
// Every operation completes at once with the result it would have if all ranks were
// identical: an all-reduce sum multiplies by the rank count and an average leaves the
// tensor as it is, an all-gather returns the rank's own block from every rank, an
// exchange receives the rank's own payload from every peer, a broadcast changes nothing,
// and a recv gets what this rank sent to that peer. So the algorithm runs its real
// kernels on real payload sizes, once, while the communicator writes an OpTrace of what
// it did (operations, sizes, compute durations, waits, phases) for every rank to replay
// on the emulated network (comm/trace_replay.hpp). The results are not the algorithm's
// convergence: only its timing and bits carry over.
#pragma once

#include <deque>
#include <map>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/emulated.hpp"
#include "comm/op_trace.hpp"
#include "comm/trace_recorder.hpp"

namespace dtsim::comm {

class RepresentativeCommunicator final : public Communicator, public TraceRecorder {
 public:
  // `neighbours`: the rank's gossip neighbours (net::Topology::neighbors), the slots
  // peers are recorded as. `timing`: how compute phases are timed (its slowdown is
  // applied at replay, per rank).
  RepresentativeCommunicator(int rank, int size, std::vector<int> neighbours, ComputeTiming timing);

  std::string backend() const override { return "representative"; }
  int rank() const override { return trace().rank; }
  int size() const override { return trace().ranks; }
  double now() const override { return clock_; }

  Op compute(const sim::ComputeCost& cost, const std::function<void()>& work) override;
  Op all_reduce(at::Tensor& tensor, ReduceOp op) override;
  Op all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) override;
  Op exchange(const at::Tensor& send, std::span<const int> peers, std::vector<at::Tensor>& received) override;
  Op send(const at::Tensor& tensor, int peer) override;
  Op recv(at::Tensor& tensor, int peer) override;
  Op broadcast(at::Tensor& tensor, int root) override;
  Op stream_all_reduce(at::Tensor& tensor, ReduceOp op) override;
  Op stream_all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) override;

  // Called by the operations' handles when the rank awaits them.
  using TraceRecorder::record_wait;

 private:
  Op issue(TracedOp traced);  // records an operation; returns its (complete) handle
  Op reduce(at::Tensor& tensor, ReduceOp op, bool stream);
  Op gather(const at::Tensor& input, std::vector<at::Tensor>& outputs, bool stream);

  ComputeTiming timing_;
  double clock_ = 0.0;
  std::map<int, std::deque<at::Tensor>> sent_;  // per peer: messages sent, for recv
};

}  // namespace dtsim::comm
