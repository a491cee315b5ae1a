#include "comm/representative.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::comm {

namespace {

// A recorded operation: complete at once; awaiting it records the wait.
class RecordedOp final : public OpState {
 public:
  RecordedOp(RepresentativeCommunicator& comm, std::uint64_t op) : comm_(comm), op_(op) {}
  bool ready() override {
    comm_.record_wait(op_);
    return true;
  }
  void resume_when_done(std::coroutine_handle<> h) override { h.resume(); }  // not reached: ready() is true

 private:
  RepresentativeCommunicator& comm_;
  std::uint64_t op_;
};

void require_contiguous(const at::Tensor& t, const char* op) {
  if (!t.defined() || !t.is_contiguous())
    throw std::invalid_argument(fmt::format("{}: tensor must be defined and contiguous", op));
}

// What a receiver of `payload` ends up holding in `slot` (reused when it fits, as the
// emulated backend does).
void receive_into(at::Tensor& slot, const at::Tensor& payload) {
  if (slot.defined() && slot.numel() == payload.numel() && slot.scalar_type() == payload.scalar_type() &&
      slot.is_contiguous())
    slot.copy_(payload.view(slot.sizes()));
  else
    slot = payload.clone();
}

}  // namespace

RepresentativeCommunicator::RepresentativeCommunicator(int rank, int size, std::vector<int> neighbours,
                                                       ComputeTiming timing)
    : TraceRecorder(rank, size, std::move(neighbours), "timing-only mode"), timing_(std::move(timing)) {}

Op RepresentativeCommunicator::issue(TracedOp traced) {
  return Op(std::make_shared<RecordedOp>(*this, record_op(std::move(traced))));
}

Op RepresentativeCommunicator::compute(const sim::ComputeCost& cost, const std::function<void()>& work) {
  const double seconds = timing_.run(cost, work);
  count_compute(seconds);
  clock_ += seconds;
  TracedOp traced;
  traced.kind = TracedOp::Kind::Compute;
  traced.seconds = seconds;
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::reduce(at::Tensor& tensor, ReduceOp op, bool stream) {
  require_contiguous(tensor, "all_reduce");
  ++traffic_.calls;
  if (op == ReduceOp::Sum) tensor.mul_(size());  // the sum of `size` identical tensors
  TracedOp traced = tensor_op(TracedOp::Kind::AllReduce, tensor, stream);
  traced.variant = static_cast<int>(op);
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::gather(const at::Tensor& input, std::vector<at::Tensor>& outputs, bool stream) {
  require_contiguous(input, "all_gather");
  if (input.dim() != 1) throw std::invalid_argument("all_gather: input must be 1-D");
  ++traffic_.calls;
  // One copy for every rank's block: algorithms only read what they gathered.
  outputs.assign(static_cast<std::size_t>(size()), input.clone());
  TracedOp traced = tensor_op(TracedOp::Kind::AllGather, input, stream);
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::all_reduce(at::Tensor& tensor, ReduceOp op) { return reduce(tensor, op, false); }
Op RepresentativeCommunicator::stream_all_reduce(at::Tensor& tensor, ReduceOp op) { return reduce(tensor, op, true); }
Op RepresentativeCommunicator::all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) {
  return gather(input, outputs, false);
}
Op RepresentativeCommunicator::stream_all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) {
  return gather(input, outputs, true);
}

Op RepresentativeCommunicator::broadcast(at::Tensor& tensor, int root) {
  require_contiguous(tensor, "broadcast");
  if (root < 0 || root >= size())
    throw std::invalid_argument(fmt::format("broadcast: root {} of {} ranks", root, size()));
  ++traffic_.calls;
  TracedOp traced = tensor_op(TracedOp::Kind::Broadcast, tensor);
  traced.variant = root;
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::exchange(const at::Tensor& send, std::span<const int> peers,
                                        std::vector<at::Tensor>& received) {
  require_contiguous(send, "exchange");
  ++traffic_.calls;
  TracedOp traced = tensor_op(TracedOp::Kind::Exchange, send);
  for (int peer : peers) traced.peer_slots.push_back(slot_of(peer, "exchange"));
  received.resize(peers.size());
  for (auto& slot : received) receive_into(slot, send);  // every peer sends what this rank sends
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::send(const at::Tensor& tensor, int peer) {
  require_contiguous(tensor, "send");
  ++traffic_.calls;
  TracedOp traced = tensor_op(TracedOp::Kind::Send, tensor);
  traced.variant = slot_of(peer, "send");
  sent_[peer].push_back(tensor.clone());
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::recv(at::Tensor& tensor, int peer) {
  require_contiguous(tensor, "recv");
  ++traffic_.calls;
  TracedOp traced = tensor_op(TracedOp::Kind::Recv, tensor);
  traced.variant = slot_of(peer, "receive");
  auto& queue = sent_[peer];
  if (queue.empty())
    throw std::invalid_argument(fmt::format(
        "timing-only mode: rank {} receives from rank {} before sending to it, so the message cannot be mirrored",
        rank(), peer));
  tensor.copy_(queue.front().view(tensor.sizes()));  // the peer sends what this rank sent it
  queue.pop_front();
  return issue(std::move(traced));
}

}  // namespace dtsim::comm
