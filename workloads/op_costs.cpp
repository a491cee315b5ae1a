// RecordFunction::inputs() is read here: its header's debug-only validity check must be
// off, whatever the build, since Debian's LibTorch (as PyTorch's) is built with NDEBUG and
// never marks the inputs valid, so the check would refuse every call in a debug build.
// (The file skips the precompiled ATen header, which would include the header first.)
#ifndef NDEBUG
#define NDEBUG
#endif

#include "workloads/op_costs.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include <ATen/ExpandUtils.h>
#include <ATen/core/function_schema.h>

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

// An op's arguments (its schema's, in order).
using Args = c10::ArrayRef<const c10::IValue>;

// The op's own arguments: the last of the inputs RecordFunction holds, since a call from the
// JIT interpreter hands it the interpreter's whole stack.
Args arguments_of(const at::RecordFunction& fn) {
  const auto inputs = fn.inputs();
  const auto schema = fn.operator_schema();
  const std::size_t n = schema ? schema->arguments().size() : inputs.size();
  return n <= inputs.size() ? inputs.slice(inputs.size() - n) : Args();
}

const at::Tensor* tensor_at(Args args, std::size_t i) {
  if (i >= args.size() || !args[i].isTensor() || !args[i].toTensor().defined()) return nullptr;
  return &args[i].toTensor();
}

double bytes_of(const at::Tensor& t) { return static_cast<double>(t.numel()) * static_cast<double>(t.element_size()); }

// Argument i as one value per spatial dimension (a single value applies to all), or
// `fallback` where it is absent.
std::vector<std::int64_t> per_dim(Args args, std::size_t i, std::size_t dims, std::int64_t fallback) {
  std::vector<std::int64_t> v(dims, fallback);
  if (i < args.size() && args[i].isIntList()) {
    const auto given = args[i].toIntVector();
    for (std::size_t d = 0; d < dims && !given.empty(); ++d) v[d] = given.size() == 1 ? given[0] : given.at(d);
  }
  return v;
}

// A convolution's output elements and multiply-adds, from its arguments:
// conv2d(input, weight, bias, stride, padding, dilation, groups) and
// [_]convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
// groups, ...). Output size per spatial dimension (in + 2 pad - dilation (k - 1) - 1) /
// stride + 1, transposed (in - 1) stride - 2 pad + dilation (k - 1) + output_padding + 1;
// padding "same" keeps the input's size, "valid" is 0.
std::pair<double, double> conv_size(const char* name, Args inputs, const at::Tensor& x, const at::Tensor& w) {
  const std::size_t dims = static_cast<std::size_t>(w.dim() - 2);
  if (w.dim() < 3 || x.dim() < static_cast<std::int64_t>(dims) + 1) return {0, 0};
  const bool conv2d = std::strcmp(name, "aten::conv2d") == 0;
  const bool transposed = !conv2d && inputs.size() > 6 && inputs[6].isBool() && inputs[6].toBool();
  const std::size_t groups_at = conv2d ? 6 : 8;
  const std::int64_t groups = inputs.size() > groups_at && inputs[groups_at].isInt() ? inputs[groups_at].toInt() : 1;
  const auto stride = per_dim(inputs, 3, dims, 1), dilation = per_dim(inputs, 5, dims, 1);
  const auto pad = per_dim(inputs, 4, dims, 0);
  const bool same = inputs.size() > 4 && inputs[4].isString() && inputs[4].toStringRef() == "same";
  const auto output_padding = transposed ? per_dim(inputs, 7, dims, 0) : std::vector<std::int64_t>(dims, 0);
  const std::int64_t spatial0 = x.dim() - static_cast<std::int64_t>(dims);
  double out = static_cast<double>(transposed ? w.size(1) * groups : w.size(0));
  if (spatial0 > 1) out *= static_cast<double>(x.size(0));  // batched
  for (std::size_t d = 0; d < dims; ++d) {
    const std::int64_t in = x.size(spatial0 + static_cast<std::int64_t>(d)), k = w.size(2 + static_cast<std::int64_t>(d));
    std::int64_t size = 0;
    if (same) size = in;
    else if (transposed) size = (in - 1) * stride[d] - 2 * pad[d] + dilation[d] * (k - 1) + output_padding[d] + 1;
    else size = (in + 2 * pad[d] - dilation[d] * (k - 1) - 1) / stride[d] + 1;
    out *= static_cast<double>(std::max<std::int64_t>(size, 0));
  }
  // Each output (each input, transposed) element meets the weights of one channel group.
  const double per_channel = static_cast<double>(w.numel() / std::max<std::int64_t>(w.size(0), 1));
  const double macs = transposed ? static_cast<double>(x.numel()) * per_channel : out * per_channel;
  return {out, macs};
}

// The op's output elements and multiply-adds, from its arguments' shapes (the boxed calls
// of the JIT interpreter do not hand RecordFunction their outputs).
std::pair<double, double> size_of(Kind kind, const char* name, Args args) {
  const at::Tensor* a = tensor_at(args, 0);
  const at::Tensor* b = tensor_at(args, 1);
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  switch (kind) {
    case Kind::conv:
      return a && b ? conv_size(name, args, *a, *b) : std::pair{0.0, 0.0};
    case Kind::linear: {  // linear(input [..., in], weight [out, in], bias)
      if (!a || !b || a->dim() < 1 || b->dim() != 2 || a->size(-1) == 0) return {0, 0};
      const double out = d(a->numel() / a->size(-1)) * d(b->size(0));
      return {out, out * d(b->size(1))};
    }
    case Kind::matrix: {
      const at::Tensor* m1 = a;
      const at::Tensor* m2 = b;
      if (std::strcmp(name, "aten::addmm") == 0) {  // addmm(bias, mat1, mat2)
        m1 = b;
        m2 = tensor_at(args, 2);
      }
      if (!m1 || !m2 || m1->dim() < 1 || m2->dim() < 1) return {0, 0};
      const double k = d(m1->size(-1));
      double out = 1;
      if (m1->dim() >= 2 && m2->dim() >= 2) {  // mm, bmm, matmul: broadcast batch x n x m
        const auto batch = at::infer_size(m1->sizes().slice(0, m1->dim() - 2), m2->sizes().slice(0, m2->dim() - 2));
        for (auto v : batch) out *= d(v);
        out *= d(m1->size(-2)) * d(m2->size(-1));
      } else if (m1->dim() >= 2) {  // matrix x vector
        out = d(m1->numel() / m1->size(-1));
      } else if (m2->dim() >= 2) {  // vector x matrix
        out = d(m2->numel() / m2->size(-2));
      }
      return {out, out * k};
    }
  }
  return {0, 0};
}

// An outermost op's record, made by the start callback (its inputs are read there: they
// view the caller's stack, which holds the outputs by the end callback).
struct Outermost : at::ObserverContext {
  RecordedOp op;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const auto kind = kind_of(fn.name());
  if (!state.active || !kind) return nullptr;
  if (++state.depth > 1) return nullptr;
  auto ctx = std::make_unique<Outermost>();
  ctx->op.name = fn.name();
  const auto args = arguments_of(fn);
  const auto [out, macs] = size_of(*kind, fn.name(), args);
  ctx->op.flops = 2.0 * macs;
  const at::Tensor* first = tensor_at(args, 0);
  ctx->op.output_bytes = first ? out * static_cast<double>(first->element_size()) : 0;
  for (const auto& input : args)
    if (input.isTensor() && input.toTensor().defined() && input.toTensor().has_storage())
      ctx->op.inputs.emplace_back(input.toTensor().storage().data(), bytes_of(input.toTensor()));
  return ctx;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (!state.active || !kind_of(fn.name())) return;
  --state.depth;
  if (ctx) state.ops.push_back(std::move(static_cast<Outermost*>(ctx)->op));
}

std::string layer_of(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? parameter : parameter.substr(0, dot);
}

}  // namespace

OpRecorder::OpRecorder() {
  if (state.active) throw std::logic_error("OpRecorder: one is already recording on this thread");
  state = ThreadState{.active = true};
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_start, on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
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
