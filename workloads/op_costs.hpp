// workloads::OpRecorder and estimate_cost_table: a cost table (shape_models.hpp's
// ShapeLayer list) for a module that has none (a TorchScript model), estimated from the
// operations one forward pass runs.
//
// While an OpRecorder lives, every outermost call on this thread of aten::conv2d,
// aten::convolution, aten::_convolution, aten::linear, aten::addmm, aten::mm,
// aten::matmul or aten::bmm is recorded with its inputs (ATen's RecordFunction callbacks;
// an op these call internally, such as linear's addmm, is not counted again); its output's
// size follows from the inputs' shapes and the conv's stride, padding and dilation (the JIT
// interpreter's boxed calls hand RecordFunction no outputs). Its FLOPs are 2 x
// multiply-adds: output elements x the length of the dot product each is (conv: the
// weight's elements per output channel, C/groups x kh x kw; transposed conv: input elements
// x the weight's elements per input channel; linear: the weight's in-features; addmm, mm,
// matmul, bmm: the first matrix's last dimension, batch dimensions broadcast). Bytes,
// as the shape models count them: the tensors it reads plus the one it writes, the inputs
// that are parameters once per batch, the other inputs and the output per sample. Every
// other operation (BatchNorm, ReLU, pooling, element-wise arithmetic) costs nothing in the
// estimate.
//
// estimate_cost_table: a layer per module that owns parameters (the parameter names up to
// their last dot: "layer1.0.conv1" holds layer1.0.conv1.weight), in parameter order. An op
// is charged to the layer of the largest parameter it reads (linear's weight rather than
// its bias); an op that reads no parameter (an activation times an activation) to the
// layer charged last before it, as the shape models charge parameter-free operations to
// the preceding parametrised layer (its backward runs just before that layer's), or, when
// no op before it read a parameter, to the first layer charged after it. Per-sample costs
// are the probe's divided by its batch.
#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "workloads/shape_models.hpp"

namespace dtsim::workloads {

struct RecordedOp {
  std::string name;  // "aten::conv2d"
  double flops = 0;  // 2 x multiply-adds
  // The storages of its tensor inputs with each input's bytes, and the output's bytes.
  std::vector<std::pair<const void*, double>> inputs;
  double output_bytes = 0;
};

// Records the ops above run on this thread during its lifetime (not reentrant: one at a time
// per thread).
class OpRecorder {
 public:
  OpRecorder();
  ~OpRecorder();
  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;
  // The ops recorded so far, in call order.
  std::vector<RecordedOp> take();

 private:
  at::CallbackHandle handle_;
};

// The cost table of a module with `params` (name, tensor) from the ops of one forward pass
// on `batch` samples.
std::vector<ShapeLayer> estimate_cost_table(const std::vector<RecordedOp>& ops,
                                            const std::vector<std::pair<std::string, at::Tensor>>& params,
                                            std::int64_t batch);

}  // namespace dtsim::workloads
