// The shape-only models' building blocks (shape_models.hpp): a layer list built in forward
// order, each parametrised layer with its tensors (state_dict names and shapes) and its
// forward cost per sample, parameter-free operations charged to the layer before them.
// Costs: conv 2 Cin Cout k k Hout Wout FLOPs; linear 2 in out per token; attention 2 S S h
// each for the scores and the context; BatchNorm, LayerNorm, activations and residual adds a
// few FLOPs per element and mostly bytes (fp32 activations read plus written; weights once
// per batch).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "workloads/shape_models.hpp"

namespace dtsim::workloads::shapes {

// Builds the layer list; op() charges a parameter-free operation to the last layer.
class ModelBuilder {
 public:
  void layer(const std::string& name, std::vector<TensorShape> tensors, double flops, double bytes, double fixed) {
    layers_.push_back({name, std::move(tensors), flops, bytes, fixed});
  }
  void op(double flops, double bytes) {
    if (layers_.empty()) throw std::logic_error("shape model: an operation before the first layer");
    layers_.back().flops += flops;
    layers_.back().bytes += bytes;
  }
  std::vector<ShapeLayer> done() { return std::move(layers_); }

 private:
  std::vector<ShapeLayer> layers_;
};

struct Image {
  std::int64_t c, h, w;
  double numel() const { return static_cast<double>(c * h * w); }
};

// A conv named "<name>.weight", bias-free unless `bias` ("<name>.bias": one more FLOP per
// output element, its values read once per batch); updates x to the output.
inline void conv(ModelBuilder& b, const std::string& name, Image& x, std::int64_t out, std::int64_t k, std::int64_t stride,
          std::int64_t pad, bool bias = false) {
  const Image y{out, (x.h + 2 * pad - k) / stride + 1, (x.w + 2 * pad - k) / stride + 1};
  const double weights = static_cast<double>(x.c * out * k * k);
  std::vector<TensorShape> tensors{{name + ".weight", {out, x.c, k, k}}};
  if (bias) tensors.push_back({name + ".bias", {out}});
  b.layer(name, std::move(tensors), 2.0 * weights * static_cast<double>(y.h * y.w) + (bias ? y.numel() : 0.0),
          4.0 * (x.numel() + y.numel()), 4.0 * (weights + (bias ? static_cast<double>(out) : 0.0)));
  x = y;
}

// BatchNorm (weight, bias) in inference form y = a x + c: 2 FLOPs and 8 bytes per element;
// a following ReLU adds 1 FLOP and 8 bytes per element.
inline void batchnorm(ModelBuilder& b, const std::string& name, const Image& x, bool relu) {
  b.layer(name, {{name + ".weight", {x.c}}, {name + ".bias", {x.c}}}, 2.0 * x.numel(), 8.0 * x.numel(),
          8.0 * static_cast<double>(x.c));
  if (relu) b.op(x.numel(), 8.0 * x.numel());
}

// Linear layer on `tokens` rows: weight [out, in] (or [in, out] for GPT-2's Conv1D) and bias.
inline void linear(ModelBuilder& b, const std::string& name, std::int64_t in, std::int64_t out, double tokens,
            bool transposed = false) {
  const std::vector<std::int64_t> shape = transposed ? std::vector<std::int64_t>{in, out} : std::vector<std::int64_t>{out, in};
  const double w = static_cast<double>(in * out);
  b.layer(name, {{name + ".weight", shape}, {name + ".bias", {out}}},
          tokens * (2.0 * w + static_cast<double>(out)), 4.0 * tokens * static_cast<double>(in + out),
          4.0 * (w + static_cast<double>(out)));
}

// LayerNorm over `tokens` x `h`: about 8 FLOPs and 8 bytes per element.
inline void layernorm(ModelBuilder& b, const std::string& name, std::int64_t h, double tokens) {
  const double n = tokens * static_cast<double>(h);
  b.layer(name, {{name + ".weight", {h}}, {name + ".bias", {h}}}, 8.0 * n, 8.0 * n, 8.0 * static_cast<double>(h));
}

// Residual add of n elements: 1 FLOP, 12 bytes per element.
inline void add(ModelBuilder& b, double n) { b.op(n, 12.0 * n); }

// Self-attention on S tokens of width h in `heads` heads: scores Q K^T and context P V
// (2 S S h FLOPs each), softmax over heads x S x S.
inline void attention(ModelBuilder& b, std::int64_t s, std::int64_t h, std::int64_t heads) {
  const double ss = static_cast<double>(s * s), sh = static_cast<double>(s * h), p = static_cast<double>(heads) * ss;
  b.op(2.0 * ss * static_cast<double>(h), 4.0 * (2.0 * sh + p));  // scores: read Q, K; write P
  b.op(5.0 * p, 8.0 * p);                                         // softmax
  b.op(2.0 * ss * static_cast<double>(h), 4.0 * (p + 2.0 * sh));  // context: read P, V; write
}

}  // namespace dtsim::workloads::shapes
