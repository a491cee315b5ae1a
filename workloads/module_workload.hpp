// workloads::ModuleWorkload: a Workload over a module that maps a batch of samples to
// logits, trained with softmax cross-entropy under autograd (the built-in image models,
// image_models.hpp, write their backward by hand instead). The module is a torch::nn
// module (resnet20_model.hpp) or a TorchScript one (torchscript_model.hpp), seen through
// TrainableModule; a TorchScript module may instead compute its own loss (Loss::module).
//
// Parameters and gradients: the algorithm owns the parameter tensors. forward(params)
// copies them into the module's parameters (under NoGradGuard, so the copy is no part of
// the graph) and runs the module in training mode under autograd; backward stage 0 runs
// the one backward call and hands out its own gradients, every later stage copies the
// module's .grad of its parameters into the algorithm's `grads`. The module's buffers
// (BatchNorm's running mean and variance) are the rank's own and never synchronised, as
// in the reference (a rank's module is its model; only parameters are communicated).
//
// Stages: at construction a probe forward and backward on two random samples records the
// order in which autograd makes each parameter's gradient ready (a hook per parameter);
// the stages are that order cut into runs of tensors of one layer of the cost table. The
// probe leaves parameters, gradients and buffers as it found them.
//
// Costs: the cost table is shape_models.hpp's ShapeLayer list (forward FLOPs and bytes per
// sample and weight bytes per batch, per parametrised layer, each naming its tensors); a
// stage costs twice its layer's forward (as the shape models do). Every parameter of the
// module must be in the table, with its shape. Without a table (a TorchScript module) the
// probe forward also records the module's matrix products and convolutions and the table
// is estimated from them (op_costs.hpp): cost_source() says which.
//
// The module computes in the dtype of the parameters it is given (it converts itself and
// the inputs), so tests can check gradients in double precision.
//
// Evaluation: the module in eval() mode (running statistics, no updates), under
// NoGradGuard, over the whole training and test sets in chunks whose widest activations
// take a few MiB (16 to 2,000 samples: evaluation_chunk in the .cpp).
#pragma once

#include <torch/nn/modules/container/any.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workloads/labelled_data.hpp"
#include "workloads/shape_models.hpp"
#include "workloads/shard_batches.hpp"
#include "workloads/workload.hpp"

namespace dtsim::workloads {

// The module as the workload uses it: its own parameter and buffer tensors (which the
// workload overwrites in place), its forward, its mode and device.
class TrainableModule {
 public:
  virtual ~TrainableModule() = default;
  // Recursively, in registration order ("layer1.0.conv1.weight").
  virtual std::vector<std::pair<std::string, at::Tensor>> named_parameters() const = 0;
  virtual std::vector<at::Tensor> buffers() const = 0;
  // Logits [B, classes] of a batch x [B, ...].
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // The module's own mean loss of (x, y), and its logits where it returns them (else an
  // undefined tensor): Loss::module only.
  virtual std::pair<at::Tensor, at::Tensor> forward_loss(const at::Tensor& x, const at::Tensor& y);
  virtual void train(bool on) = 0;
  virtual void to(at::Device device) = 0;
  // The torch::nn module underneath, or null.
  virtual const torch::nn::Module* nn_module() const { return nullptr; }
};

// A torch::nn module behind the interface.
std::unique_ptr<TrainableModule> trainable(torch::nn::AnyModule module);

struct ModuleModel {
  // forward(x [B, ...]) -> logits [B, classes]; its parameters already initialised (the
  // initial parameters of every rank), on the CPU. Empty when `other` is set.
  torch::nn::AnyModule module;
  // The cost table: the parametrised layers in forward order, their tensors by name.
  // Empty: estimated from the probe forward's operations.
  std::vector<ShapeLayer> layers;
  // Any other module (a TorchScript one), used instead of `module` when set.
  std::shared_ptr<TrainableModule> other;
  // Loss::cross_entropy: softmax cross-entropy on forward(x); Loss::module: the module's
  // forward(x, y) is the loss.
  enum class Loss { cross_entropy, module } loss = Loss::cross_entropy;
};

class ModuleWorkload final : public Workload {
 public:
  // Rank `rank` of `ranks`: mini-batches of `batch_size` from its `partition` of the
  // training set ("iid" or "by_label"), reshuffled every local epoch from a generator
  // seeded by (seed, rank), augmented when the data says so. The module moves to the
  // data's device.
  ModuleWorkload(ModuleModel model, std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                 const std::string& partition, std::uint64_t seed, int rank, int ranks);

  std::vector<at::Tensor> initial_parameters() const override;
  std::vector<std::string> parameter_names() const override { return names_; }

  double forward(const std::vector<at::Tensor>& params) override;
  void backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) override;
  sim::ComputeCost forward_cost() const override { return forward_cost_; }
  sim::ComputeCost backward_cost() const override;
  DataShard data_shard() const override { return {batches_.samples(), batches_.batch()}; }
  std::vector<BackwardStage> backward_stages() const override { return stages_; }
  void backward_stage(std::size_t k, const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) override;

  Evaluation evaluate(const std::vector<at::Tensor>& params) const override;
  std::optional<Evaluation> evaluate_test(const std::vector<at::Tensor>& params) const override;

  // Parameter indices in the order the probe saw autograd make their gradients ready.
  const std::vector<std::size_t>& ready_order() const { return ready_order_; }
  // The rank's module (its parameters as of the last forward or evaluation, its buffers).
  const TrainableModule& trainable_module() const { return *module_; }
  // The same, for a torch::nn module (std::logic_error otherwise).
  const torch::nn::Module& module() const;
  // "table" (the model's ShapeLayers) or "estimated from ops".
  const std::string& cost_source() const { return cost_source_; }
  // The cost table the stages were cut from (the model's, or the estimate).
  const std::vector<ShapeLayer>& cost_table() const { return layers_; }

 private:
  // Copies `params` into the module, first converting the module to their dtype; returns it.
  at::ScalarType load_parameters(const std::vector<at::Tensor>& params) const;
  // The probe: records the ready order, and the estimated cost table when `estimate`.
  void probe(const std::vector<std::int64_t>& sample_shape, bool estimate);
  void build_stages();
  // The mean loss of a batch and, where there are any, its logits.
  std::pair<at::Tensor, at::Tensor> loss_of(const at::Tensor& x, const at::Tensor& y) const;
  Evaluation evaluate_on(const std::vector<at::Tensor>& params, const at::Tensor& x, const at::Tensor& y) const;

  // Evaluation (const) loads the parameters it is given into the module (a cache of them:
  // the next forward loads its own) and toggles eval mode: the module is held by pointer.
  std::shared_ptr<TrainableModule> module_;
  ModuleModel::Loss loss_kind_;
  std::vector<ShapeLayer> layers_;
  std::string cost_source_;
  std::vector<at::Tensor> module_params_;  // the module's parameters, in names_ order
  std::vector<std::string> names_;
  std::vector<at::Tensor> initial_;  // on the CPU
  std::vector<std::size_t> ready_order_;
  std::vector<BackwardStage> stages_;
  sim::ComputeCost forward_cost_;

  std::shared_ptr<const LabelledData> data_;
  at::Generator gen_;
  ShardBatches batches_;
  std::int64_t eval_chunk_ = 2000;  // samples per evaluation chunk
  at::Tensor loss_;  // of the last forward, until backward stage 0 consumes its graph
};

}  // namespace dtsim::workloads
