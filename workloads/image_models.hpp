// Fashion-MNIST classifiers with a hand-written, layer-by-layer forward and backward pass
// in ATen ops (no autograd at run time), split into backward stages, last layer first.
//
// "mlp": flatten - fc1 784x256 - relu - fc2 256x128 - relu - fc3 128x10.
// "cnn": conv1 3x3 1->16 (pad 1) - relu - maxpool 2 - conv2 3x3 16->32 (pad 1) - relu -
//        maxpool 2 - flatten - fc1 1568x128 - relu - fc2 128x10.
// Loss: softmax cross-entropy (log_softmax + NLL), mean over the batch.
// Parameters: "<layer>.weight" ([out, in] or [out, in, k, k]) then "<layer>.bias" ([out]),
// in forward order, initialised as PyTorch's nn.Linear / nn.Conv2d do (Kaiming-uniform
// with a = sqrt(5): weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))) from the seed,
// identically on every rank.
// Stage k (0 = first) produces the weight and bias gradients of the k-th parametrised
// layer counted from the output, and passes the input gradient down to the next one (the
// first layer's stage computes no input gradient). Costs count FLOPs as 2 x multiply-adds
// and bytes as fp32 tensors read plus written.
// The network computes in the dtype of the parameters it is given (inputs are cast), so
// tests can check gradients in double precision.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/compute_cost.hpp"
#include "workloads/fashion_mnist.hpp"
#include "workloads/workload.hpp"

namespace dtsim::workloads {

class LayerNet {
 public:
  enum class Op { Conv, Linear, Relu, MaxPool, Flatten };
  struct Layer {
    Op op;
    std::string name;              // parametrised layers only
    std::int64_t in = 0, out = 0;  // channels (conv) or features (linear)
    std::int64_t kernel = 0, pad = 0;
    std::size_t weight = 0;                 // parameter index of the weight; the bias is weight + 1
    std::vector<std::int64_t> in_shape, out_shape;  // per sample
  };

  // "mlp" or "cnn" for samples of `sample_shape` ({C, H, W}) in `classes` classes (the
  // data source's; Fashion-MNIST's by default); throws std::invalid_argument otherwise.
  static LayerNet make(const std::string& model, const std::vector<std::int64_t>& sample_shape = {1, 28, 28},
                       std::int64_t classes = 10);

  const std::vector<Layer>& layers() const { return layers_; }
  std::vector<std::string> parameter_names() const;
  std::vector<at::Tensor> initial_parameters(std::uint64_t seed) const;

  // Logits of a batch [B, 1, 28, 28] without storing anything.
  at::Tensor logits(const std::vector<at::Tensor>& params, const at::Tensor& x) const;
  // Forward pass that keeps the activations backward needs; returns the mean loss.
  double forward(const std::vector<at::Tensor>& params, const at::Tensor& x, const at::Tensor& y);
  std::size_t num_stages() const { return param_layers_.size(); }
  std::vector<std::size_t> stage_params(std::size_t k) const;
  // Runs stage k of the backward pass of the last forward (stages must run in order 0, 1, ...).
  void backward_stage(std::size_t k, const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads);
  void backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads);

  sim::ComputeCost forward_cost(std::int64_t batch) const;
  sim::ComputeCost stage_cost(std::size_t k, std::int64_t batch) const;
  sim::ComputeCost backward_cost(std::int64_t batch) const;

 private:
  explicit LayerNet(std::vector<Layer> layers);
  // Runs layer i forward; stores what its backward needs (ReLU output, max-pool indices)
  // in *saved when saved is not null.
  at::Tensor apply(std::size_t i, const std::vector<at::Tensor>& params, const at::Tensor& x, at::Tensor* saved) const;
  // Passes grad_ back through the parameter-free layers (from, to] in reverse (from > to).
  void back_through(std::size_t from_exclusive, std::size_t to_exclusive);
  // Cost of the parameter-free layers' backward in (to, from).
  sim::ComputeCost elementwise_back_cost(std::size_t from_exclusive, std::size_t to_exclusive, std::int64_t batch) const;

  std::vector<Layer> layers_;
  std::vector<std::size_t> param_layers_;  // indices into layers_, forward order
  std::vector<at::Tensor> inputs_;         // input of each layer in the last forward
  std::vector<at::Tensor> saved_;          // relu output / maxpool indices of the last forward
  at::Tensor log_probs_, labels_, grad_;   // grad_: d loss / d (output of the layer being processed)
};

// Rank `rank`'s Fashion-MNIST workload: `model` ("mlp" or "cnn"), mini-batches of
// `batch_size` from its partition, reshuffled every local epoch from a generator seeded by
// (seed, rank) (an epoch's last incomplete batch is skipped); evaluate() runs over the
// whole training set, evaluate_test() over the test set, both in chunks.
std::unique_ptr<Workload> make_image_workload(const std::string& model, std::shared_ptr<const LabelledData> data,
                                              std::int64_t batch_size, const std::string& partition,
                                              std::uint64_t seed, int rank, int ranks);

}  // namespace dtsim::workloads
