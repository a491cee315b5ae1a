#include "workloads/op_costs.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

namespace dtsim::workloads {

namespace {

enum class Kind { conv, linear, matrix };

std::optional<Kind> kind_of(const char* name) {
  for (const char* conv : {"aten::conv2d", "aten::convolution", "aten::_convolution"})
    if (std::strcmp(name, conv) == 0) return Kind::conv;
  if (std::strcmp(name, "aten::linear") == 0) return Kind::linear;
  for (const char* matrix : {"aten::addmm", "aten::mm", "aten::matmul", "aten::bmm"})
    if (std::strcmp(name, matrix) == 0) return Kind::matrix;
  return std::nullopt;
}

// Per thread: the recorded ops and how deep in recognised ops the thread is (an op inside
// another, linear's addmm, is the outer op's work).
struct ThreadState {
  std::vector<RecordedOp> ops;
  int depth = 0;
  bool active = false;
};
thread_local ThreadState state;

// What the start callback saw of an outermost op: its inputs are read there, since the
// JIT interpreter's inputs() view its stack, which holds the outputs by the end callback.
struct Outermost : at::ObserverContext {
  RecordedOp op;
  double per_output = 0;  // multiply-adds per output element
  double fixed_macs = -1;  // or, where >= 0, the op's multiply-adds (a transposed conv)
};

const at::Tensor* tensor_at(const at::RecordFunction& fn, std::size_t i) {
  const auto inputs = fn.inputs();
  if (i >= inputs.size() || !inputs[i].isTensor() || !inputs[i].toTensor().defined()) return nullptr;
  return &inputs[i].toTensor();
}

double bytes_of(const at::Tensor& t) { return static_cast<double>(t.numel()) * static_cast<double>(t.element_size()); }

// The multiply-adds of the op, per output element or in all (see Outermost).
void count_macs(Kind kind, const at::RecordFunction& fn, Outermost& ctx) {
  const at::Tensor* a = tensor_at(fn, 0);
  const at::Tensor* b = tensor_at(fn, 1);
  switch (kind) {
    case Kind::conv: {
      if (!b || b->dim() < 1 || b->size(0) == 0) return;
      // convolution(input, weight, bias, stride, padding, dilation, transposed, ...)
      const auto inputs = fn.inputs();
      const bool transposed = std::strcmp(fn.name(), "aten::conv2d") != 0 && inputs.size() > 6 && inputs[6].isBool() &&
                              inputs[6].toBool();
      const double per_channel = static_cast<double>(b->numel() / b->size(0));
      if (transposed) {
        // Each input element meets every weight of its input channel once.
        ctx.fixed_macs = a ? per_channel * static_cast<double>(a->numel()) : 0;
      } else {
        ctx.per_output = per_channel;
      }
      return;
    }
    case Kind::linear:
      if (b && b->dim() >= 1) ctx.per_output = static_cast<double>(b->size(-1));
      return;
    case Kind::matrix: {
      const at::Tensor* m = std::strcmp(fn.name(), "aten::addmm") == 0 ? b : a;  // addmm(bias, mat1, mat2)
      if (m && m->dim() >= 1) ctx.per_output = static_cast<double>(m->size(-1));
      return;
    }
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const auto kind = kind_of(fn.name());
  if (!state.active || !kind) return nullptr;
  if (++state.depth > 1) return nullptr;
  auto ctx = std::make_unique<Outermost>();
  ctx->op.name = fn.name();
  count_macs(*kind, fn, *ctx);
  for (const auto& input : fn.inputs())
    if (input.isTensor() && input.toTensor().defined() && input.toTensor().has_storage())
      ctx->op.inputs.emplace_back(input.toTensor().storage().data(), bytes_of(input.toTensor()));
  return ctx;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx_base) {
  if (!state.active || !kind_of(fn.name())) return;
  --state.depth;
  auto* ctx = static_cast<Outermost*>(ctx_base);
  if (!ctx) return;
  const auto outputs = fn.outputs();
  double out_elements = 0;
  if (!outputs.empty() && outputs[0].isTensor() && outputs[0].toTensor().defined()) {
    out_elements = static_cast<double>(outputs[0].toTensor().numel());
    ctx->op.output_bytes = bytes_of(outputs[0].toTensor());
  }
  ctx->op.flops = 2.0 * (ctx->fixed_macs >= 0 ? ctx->fixed_macs : out_elements * ctx->per_output);
  state.ops.push_back(std::move(ctx->op));
}

std::string layer_of(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? parameter : parameter.substr(0, dot);
}

}  // namespace

OpRecorder::OpRecorder() {
  if (state.active) throw std::logic_error("OpRecorder: one is already recording on this thread");
  state = ThreadState{.active = true};
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
                                           .needsInputs(true)
                                           .needsOutputs(true)
                                           .scopes({at::RecordScope::FUNCTION}));
}

OpRecorder::~OpRecorder() {
  at::removeCallback(handle_);
  state = ThreadState{};
}

std::vector<RecordedOp> OpRecorder::take() { return std::exchange(state.ops, {}); }

std::vector<ShapeLayer> estimate_cost_table(const std::vector<RecordedOp>& ops,
                                            const std::vector<std::pair<std::string, at::Tensor>>& params,
                                            std::int64_t batch) {
  std::vector<ShapeLayer> layers;
  std::map<std::string, std::size_t> layer_index;
  std::map<const void*, std::size_t> param_of_storage;  // parameter index
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& [name, tensor] = params[i];
    const auto layer = layer_of(name);
    auto [it, fresh] = layer_index.emplace(layer, layers.size());
    if (fresh) layers.push_back({.name = layer});
    layers[it->second].tensors.push_back({name, tensor.sizes().vec()});
    if (tensor.has_storage()) param_of_storage.emplace(tensor.storage().data(), i);
  }
  if (layers.empty()) return layers;
  const double b = static_cast<double>(std::max<std::int64_t>(batch, 1));

  // The layer of each op (the largest parameter it reads), or none.
  std::vector<std::optional<std::size_t>> charged(ops.size());
  for (std::size_t n = 0; n < ops.size(); ++n) {
    double largest = -1;
    for (const auto& [storage, bytes] : ops[n].inputs)
      if (const auto it = param_of_storage.find(storage); it != param_of_storage.end() && bytes > largest) {
        largest = bytes;
        charged[n] = layer_index.at(layer_of(params[it->second].first));
      }
  }
  // Parameter-free ops: the layer before them, else the first one after them.
  std::optional<std::size_t> previous;
  for (auto& c : charged) c ? (void)(previous = c) : (void)(c = previous);
  std::optional<std::size_t> next;
  for (auto it = charged.rbegin(); it != charged.rend(); ++it) *it ? (void)(next = *it) : (void)(*it = next);

  for (std::size_t n = 0; n < ops.size(); ++n) {
    auto& layer = layers[charged[n].value_or(0)];
    layer.flops += ops[n].flops / b;
    layer.bytes += ops[n].output_bytes / b;
    for (const auto& [storage, bytes] : ops[n].inputs) {
      if (param_of_storage.count(storage)) layer.fixed_bytes += bytes;
      else layer.bytes += bytes / b;
    }
  }
  return layers;
}

}  // namespace dtsim::workloads
