#include "comm/trace_recorder.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::comm {

TraceRecorder::TraceRecorder(int rank, int ranks, std::vector<int> neighbours, std::string who)
    : neighbours_(std::move(neighbours)), who_(std::move(who)) {
  trace_.rank = rank;
  trace_.ranks = ranks;
}

std::uint64_t TraceRecorder::record_op(TracedOp op) {
  const std::uint64_t id = trace_.operations++;
  if (recording_) trace_.ops.push_back(std::move(op));
  return id;
}

void TraceRecorder::record_wait(std::uint64_t op) {
  if (!recording_) return;
  TracedOp wait;
  wait.kind = TracedOp::Kind::Wait;
  wait.op = op;
  trace_.ops.push_back(wait);
}

TracedOp TraceRecorder::tensor_op(TracedOp::Kind kind, const at::Tensor& tensor, bool stream) {
  TracedOp op;
  op.kind = kind;
  op.stream = stream;
  op.dtype = tensor.scalar_type();
  op.numel = tensor.numel();
  return op;
}

int TraceRecorder::slot_of(int peer, const char* op) const {
  auto it = std::find(neighbours_.begin(), neighbours_.end(), peer);
  if (it == neighbours_.end())
    throw std::invalid_argument(
        fmt::format("{}: rank {} {}s with rank {}, which is not one of its gossip neighbours, so its trace cannot be "
                    "replayed",
                    who_, trace_.rank, op, peer));
  return static_cast<int>(it - neighbours_.begin());
}

void TraceRecorder::phase_begin(std::size_t index, const std::string& name) {
  if (!recording_) return;
  if (trace_.phase_names.size() <= index) trace_.phase_names.resize(index + 1);
  trace_.phase_names[index] = name;
  TracedOp traced;
  traced.kind = TracedOp::Kind::PhaseBegin;
  traced.variant = static_cast<int>(index);
  trace_.ops.push_back(std::move(traced));
}

void TraceRecorder::phase_end(std::size_t index) {
  if (!recording_) return;
  TracedOp traced;
  traced.kind = TracedOp::Kind::PhaseEnd;
  traced.variant = static_cast<int>(index);
  trace_.ops.push_back(std::move(traced));
}

void TraceRecorder::mark(TraceMark mark, std::int64_t value) {
  if (!recording_) return;
  TracedOp traced;
  traced.kind = TracedOp::Kind::Mark;
  traced.variant = static_cast<int>(mark);
  traced.numel = value;
  trace_.ops.push_back(std::move(traced));
  if (mark == TraceMark::End) recording_ = false;
}

}  // namespace dtsim::comm
