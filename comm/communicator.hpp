// comm::Communicator: a rank's window onto the job. Algorithms are written once against
// it and run unchanged on every backend (emulated, Gloo, NCCL; live_backend.hpp).
//
// Every operation has the same shape, as in c10d: it starts at once and returns an Op
// that the rank co_awaits when it needs the result, so communication can overlap compute.
// Buffers handed to an operation must not be touched until its Op has been awaited.
// Each operation adds the bytes it puts on the wire to the rank's Traffic counters,
// counted by the algorithm in comm/wire_bytes.hpp, identically in every backend.
// A backend that lacks an operation fails naming itself and the operation.
#pragma once

#include <ATen/ATen.h>

#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/compute_cost.hpp"

namespace dtsim::comm {

enum class ReduceOp { Sum, Average };

// What a rank has sent so far.
struct Traffic {
  std::uint64_t wire_bytes = 0;  // bytes this rank put on links, under the op's algorithm
  std::uint64_t calls = 0;       // communication operations issued
};

// The backend-specific state of one operation in flight.
class OpState {
 public:
  virtual ~OpState() = default;
  // True when the result is available. Blocking backends wait here and return true.
  virtual bool ready() = 0;
  // Called when ready() was false: resume `h` once the operation completes.
  virtual void resume_when_done(std::coroutine_handle<> h) = 0;
  // Called after completion, before the awaiting rank continues; rethrows failures.
  virtual void finish() {}
};

// Awaitable handle of an operation in flight. Awaiting twice is a no-op the second time.
class [[nodiscard]] Op {
 public:
  Op() = default;  // an already-complete operation
  explicit Op(std::shared_ptr<OpState> state) : state_(std::move(state)) {}

  bool await_ready() { return !state_ || state_->ready(); }
  void await_suspend(std::coroutine_handle<> h) { state_->resume_when_done(h); }
  void await_resume() {
    if (state_) {
      auto s = std::move(state_);
      s->finish();
    }
  }

 private:
  std::shared_ptr<OpState> state_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual std::string backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's clock in seconds: simulated time (emulated) or a steady clock (live).
  virtual double now() const = 0;

  // Runs `work` for real, then advances this rank's clock by its measured duration or by
  // `cost` under the compute model (emulated), or by the time it took (live).
  virtual Op compute(const sim::ComputeCost& cost, const std::function<void()>& work) = 0;

  // In-place all-reduce of a contiguous tensor over all ranks.
  virtual Op all_reduce(at::Tensor& tensor, ReduceOp op);
  // Gathers every rank's contiguous 1-D `input` (sizes may differ between ranks, dtype
  // may not) into `outputs[r]`, r = 0..size-1, replacing what `outputs` held.
  virtual Op all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs);
  // Neighbour exchange for gossip: sends `send` to every rank in `peers` and receives,
  // from each peer, a tensor of the same size and dtype into `received[k]` (k indexing
  // `peers`). Every peer must list this rank among its own peers.
  virtual Op exchange(const at::Tensor& send, std::span<const int> peers, std::vector<at::Tensor>& received);
  // Point-to-point: sends `tensor` to `peer` (its data is copied when the op starts),
  // and receives from `peer` into `tensor` (same size and dtype as what `peer` sends).
  // Messages between two ranks are matched in order, separately from exchange().
  virtual Op send(const at::Tensor& tensor, int peer);
  virtual Op recv(at::Tensor& tensor, int peer);
  // Broadcasts `tensor` from `root` into every rank's `tensor`.
  virtual Op broadcast(at::Tensor& tensor, int root);

  // The communication stream: one ordered queue of collectives per rank, as a GPU
  // communication stream (SINGA's DistOpt issues every fused all-reduce on one NCCL
  // stream). A stream operation is issued now (it takes its place in the collective
  // order at once) but this rank's part starts only when its previous stream operation
  // has completed, so stream operations never overlap one another while they overlap
  // the rank's compute. Emulated: the rank's arrival is deferred to the previous stream
  // operation's completion, in simulated time. The default (blocking and live backends)
  // is the plain operation: the library runs a rank's collectives in issue order.
  virtual Op stream_all_reduce(at::Tensor& tensor, ReduceOp op) { return all_reduce(tensor, op); }
  virtual Op stream_all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) {
    return all_gather(input, outputs);
  }

  const Traffic& traffic() const { return traffic_; }
  // Seconds this rank has spent in compute() so far (its clock's advance there: the cost
  // model's time emulated, wall time live).
  double compute_seconds() const { return compute_seconds_; }
  // The clock's advance of the latest compute() (a recorder's compute durations).
  double last_compute_seconds() const { return last_compute_seconds_; }

 protected:
  // Every backend's compute() counts its clock's advance here.
  void count_compute(double seconds) {
    compute_seconds_ += seconds;
    last_compute_seconds_ = seconds;
  }

  Traffic traffic_;
  double compute_seconds_ = 0.0;
  double last_compute_seconds_ = 0.0;

 private:
  [[noreturn]] void unsupported(const char* op) const;
};

}  // namespace dtsim::comm
