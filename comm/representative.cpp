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
    : neighbours_(std::move(neighbours)), timing_(std::move(timing)) {
  trace_.rank = rank;
  trace_.ranks = size;
}

Op RepresentativeCommunicator::issue(TracedOp traced) {
  const std::uint64_t op = trace_.operations++;
  if (recording_) trace_.ops.push_back(std::move(traced));
  return Op(std::make_shared<RecordedOp>(*this, op));
}

void RepresentativeCommunicator::record_wait(std::uint64_t op) {
  if (!recording_) return;
  TracedOp wait;
  wait.kind = TracedOp::Kind::Wait;
  wait.op = op;
  trace_.ops.push_back(wait);
}

int RepresentativeCommunicator::slot_of(int peer, const char* op) const {
  auto it = std::find(neighbours_.begin(), neighbours_.end(), peer);
  if (it == neighbours_.end())
    throw std::invalid_argument(fmt::format(
        "timing-only mode: rank {} {}s with rank {}, which is not one of its gossip neighbours, so its trace cannot "
        "stand for the other ranks",
        rank(), op, peer));
  return static_cast<int>(it - neighbours_.begin());
}

Op RepresentativeCommunicator::compute(const sim::ComputeCost& cost, const std::function<void()>& work) {
  const double seconds = timing_.run(cost, work);
  compute_seconds_ += seconds;
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
  TracedOp traced;
  traced.kind = TracedOp::Kind::AllReduce;
  traced.stream = stream;
  traced.dtype = tensor.scalar_type();
  traced.variant = static_cast<int>(op);
  traced.numel = tensor.numel();
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::gather(const at::Tensor& input, std::vector<at::Tensor>& outputs, bool stream) {
  require_contiguous(input, "all_gather");
  if (input.dim() != 1) throw std::invalid_argument("all_gather: input must be 1-D");
  ++traffic_.calls;
  // One copy for every rank's block: algorithms only read what they gathered.
  outputs.assign(static_cast<std::size_t>(size()), input.clone());
  TracedOp traced;
  traced.kind = TracedOp::Kind::AllGather;
  traced.stream = stream;
  traced.dtype = input.scalar_type();
  traced.numel = input.numel();
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
  TracedOp traced;
  traced.kind = TracedOp::Kind::Broadcast;
  traced.dtype = tensor.scalar_type();
  traced.variant = root;
  traced.numel = tensor.numel();
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::exchange(const at::Tensor& send, std::span<const int> peers,
                                        std::vector<at::Tensor>& received) {
  require_contiguous(send, "exchange");
  ++traffic_.calls;
  TracedOp traced;
  traced.kind = TracedOp::Kind::Exchange;
  traced.dtype = send.scalar_type();
  traced.numel = send.numel();
  for (int peer : peers) traced.peer_slots.push_back(slot_of(peer, "exchange"));
  received.resize(peers.size());
  for (auto& slot : received) receive_into(slot, send);  // every peer sends what this rank sends
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::send(const at::Tensor& tensor, int peer) {
  require_contiguous(tensor, "send");
  ++traffic_.calls;
  TracedOp traced;
  traced.kind = TracedOp::Kind::Send;
  traced.dtype = tensor.scalar_type();
  traced.numel = tensor.numel();
  traced.variant = slot_of(peer, "send");
  sent_[peer].push_back(tensor.clone());
  return issue(std::move(traced));
}

Op RepresentativeCommunicator::recv(at::Tensor& tensor, int peer) {
  require_contiguous(tensor, "recv");
  ++traffic_.calls;
  TracedOp traced;
  traced.kind = TracedOp::Kind::Recv;
  traced.dtype = tensor.scalar_type();
  traced.numel = tensor.numel();
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

void RepresentativeCommunicator::phase_begin(std::size_t index, const std::string& name) {
  if (!recording_) return;
  if (trace_.phase_names.size() <= index) trace_.phase_names.resize(index + 1);
  trace_.phase_names[index] = name;
  TracedOp traced;
  traced.kind = TracedOp::Kind::PhaseBegin;
  traced.variant = static_cast<int>(index);
  trace_.ops.push_back(std::move(traced));
}

void RepresentativeCommunicator::phase_end(std::size_t index) {
  if (!recording_) return;
  TracedOp traced;
  traced.kind = TracedOp::Kind::PhaseEnd;
  traced.variant = static_cast<int>(index);
  trace_.ops.push_back(std::move(traced));
}

void RepresentativeCommunicator::mark(TraceMark mark) {
  if (!recording_) return;
  TracedOp traced;
  traced.kind = TracedOp::Kind::Mark;
  traced.variant = static_cast<int>(mark);
  trace_.ops.push_back(std::move(traced));
  if (mark == TraceMark::End) recording_ = false;
}

}  // namespace dtsim::comm
