#include "comm/recording.hpp"

namespace dtsim::comm {

namespace {

// The wrapped communicator's operation; awaiting it records the wait and its end.
class RecordingOp final : public OpState {
 public:
  // `awaited`: the wait is already recorded (an operation that completed before it returned).
  RecordingOp(RecordingCommunicator& comm, Op inner, std::uint64_t op, bool awaited)
      : comm_(comm), inner_(std::move(inner)), op_(op), awaited_(awaited) {}
  bool ready() override {
    if (!awaited_ && !waiting_) {
      comm_.begin_wait(op_);
      waiting_ = true;
    }
    return inner_.await_ready();
  }
  void resume_when_done(std::coroutine_handle<> h) override { inner_.await_suspend(h); }
  void finish() override {
    inner_.await_resume();
    if (!awaited_) comm_.end_wait();
  }

 private:
  RecordingCommunicator& comm_;
  Op inner_;
  std::uint64_t op_;
  bool awaited_;
  bool waiting_ = false;
};

}  // namespace

RecordingCommunicator::RecordingCommunicator(Communicator& inner, std::vector<int> neighbours)
    : TraceRecorder(inner.rank(), inner.size(), std::move(neighbours), "compare"), inner_(inner), last_(inner.now()) {
  traffic_ = inner_.traffic();
  compute_seconds_ = inner_.compute_seconds();
}

void RecordingCommunicator::record_host_time() {
  const double now = inner_.now();
  const double seconds = now - last_;
  last_ = now;
  if (!recording() || seconds <= 0.0) return;
  host_seconds_ += seconds;
  TracedOp host;
  host.kind = TracedOp::Kind::Compute;
  host.seconds = seconds;
  record_wait(record_op(std::move(host)));  // the rank ran it to the end before going on
}

Op RecordingCommunicator::recorded(TracedOp traced, Op inner_op, bool complete) {
  traffic_ = inner_.traffic();
  compute_seconds_ = inner_.compute_seconds();
  const std::uint64_t id = record_op(std::move(traced));
  if (complete) record_wait(id);
  last_ = inner_.now();
  return Op(std::make_shared<RecordingOp>(*this, std::move(inner_op), id, complete));
}

void RecordingCommunicator::begin_wait(std::uint64_t op) {
  record_host_time();
  record_wait(op);
}

void RecordingCommunicator::end_wait() {
  traffic_ = inner_.traffic();
  compute_seconds_ = inner_.compute_seconds();
  last_ = inner_.now();
}

Op RecordingCommunicator::compute(const sim::ComputeCost& cost, const std::function<void()>& work) {
  record_host_time();
  Op op = inner_.compute(cost, work);
  TracedOp traced;
  traced.kind = TracedOp::Kind::Compute;
  traced.seconds = inner_.last_compute_seconds();  // the backend's own measure (or model)
  last_compute_seconds_ = traced.seconds;
  // A live backend computes before it returns: what the rank does next comes after the
  // compute, not beside it, so its wait is recorded now. An emulated compute completes
  // in simulated time and is recorded when awaited.
  const bool complete = op.await_ready();
  return recorded(std::move(traced), std::move(op), complete);
}

Op RecordingCommunicator::all_reduce(at::Tensor& tensor, ReduceOp op) {
  record_host_time();
  TracedOp traced = tensor_op(TracedOp::Kind::AllReduce, tensor);
  traced.variant = static_cast<int>(op);
  return recorded(std::move(traced), inner_.all_reduce(tensor, op));
}

Op RecordingCommunicator::stream_all_reduce(at::Tensor& tensor, ReduceOp op) {
  record_host_time();
  TracedOp traced = tensor_op(TracedOp::Kind::AllReduce, tensor, /*stream=*/true);
  traced.variant = static_cast<int>(op);
  return recorded(std::move(traced), inner_.stream_all_reduce(tensor, op));
}

Op RecordingCommunicator::all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) {
  record_host_time();
  return recorded(tensor_op(TracedOp::Kind::AllGather, input), inner_.all_gather(input, outputs));
}

Op RecordingCommunicator::stream_all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) {
  record_host_time();
  return recorded(tensor_op(TracedOp::Kind::AllGather, input, /*stream=*/true), inner_.stream_all_gather(input, outputs));
}

Op RecordingCommunicator::broadcast(at::Tensor& tensor, int root) {
  record_host_time();
  TracedOp traced = tensor_op(TracedOp::Kind::Broadcast, tensor);
  traced.variant = root;
  return recorded(std::move(traced), inner_.broadcast(tensor, root));
}

Op RecordingCommunicator::exchange(const at::Tensor& send, std::span<const int> peers,
                                   std::vector<at::Tensor>& received) {
  record_host_time();
  TracedOp traced = tensor_op(TracedOp::Kind::Exchange, send);
  for (int peer : peers) traced.peer_slots.push_back(slot_of(peer, "exchange"));
  return recorded(std::move(traced), inner_.exchange(send, peers, received));
}

Op RecordingCommunicator::send(const at::Tensor& tensor, int peer) {
  record_host_time();
  TracedOp traced = tensor_op(TracedOp::Kind::Send, tensor);
  traced.variant = slot_of(peer, "send");
  return recorded(std::move(traced), inner_.send(tensor, peer));
}

Op RecordingCommunicator::recv(at::Tensor& tensor, int peer) {
  record_host_time();
  TracedOp traced = tensor_op(TracedOp::Kind::Recv, tensor);
  traced.variant = slot_of(peer, "receive");
  return recorded(std::move(traced), inner_.recv(tensor, peer));
}

void RecordingCommunicator::phase_begin(std::size_t index, const std::string& name) {
  record_host_time();
  TraceRecorder::phase_begin(index, name);
}

void RecordingCommunicator::phase_end(std::size_t index) {
  record_host_time();
  TraceRecorder::phase_end(index);
}

void RecordingCommunicator::mark(TraceMark mark, std::int64_t value) {
  record_host_time();
  TraceRecorder::mark(mark, value);
}

}  // namespace dtsim::comm
