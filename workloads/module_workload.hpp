// workloads::ModuleWorkload: a Workload over a torch::nn module that maps a batch of
// samples to logits, trained with softmax cross-entropy under autograd (the built-in
// image models, image_models.hpp, write their backward by hand instead).
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
// module must be in the table, with its shape.
//
// The module computes in the dtype of the parameters it is given (it converts itself and
// the inputs), so tests can check gradients in double precision.
//
// Evaluation: the module in eval() mode (running statistics, no updates), under
// NoGradGuard, over the whole training and test sets in chunks of 2,000.
#pragma once

#include <torch/nn/modules/container/any.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "workloads/labelled_data.hpp"
#include "workloads/shape_models.hpp"
#include "workloads/workload.hpp"

namespace dtsim::workloads {

struct ModuleModel {
  // forward(x [B, ...]) -> logits [B, classes]; its parameters already initialised (the
  // initial parameters of every rank), on the CPU.
  torch::nn::AnyModule module;
  // The cost table: the parametrised layers in forward order, their tensors by name.
  std::vector<ShapeLayer> layers;
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
  DataShard data_shard() const override { return {shard_.numel(), batch_}; }
  std::vector<BackwardStage> backward_stages() const override { return stages_; }
  void backward_stage(std::size_t k, const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) override;

  Evaluation evaluate(const std::vector<at::Tensor>& params) const override;
  std::optional<Evaluation> evaluate_test(const std::vector<at::Tensor>& params) const override;

  // Parameter indices in the order the probe saw autograd make their gradients ready.
  const std::vector<std::size_t>& ready_order() const { return ready_order_; }
  // The rank's module (its parameters as of the last forward or evaluation, its buffers).
  const torch::nn::Module& module() const { return *module_.ptr(); }

 private:
  // Copies `params` into the module, first converting the module to their dtype; returns it.
  at::ScalarType load_parameters(const std::vector<at::Tensor>& params) const;
  void record_ready_order(const std::vector<std::int64_t>& sample_shape);
  void build_stages(const std::vector<ShapeLayer>& layers);
  Evaluation evaluate_on(const std::vector<at::Tensor>& params, const at::Tensor& x, const at::Tensor& y) const;

  // Evaluation loads the parameters it is given into the module (a cache of them: the
  // next forward loads its own) and toggles eval mode, hence mutable.
  mutable torch::nn::AnyModule module_;
  std::vector<at::Tensor> module_params_;  // the module's parameters, in names_ order
  std::vector<std::string> names_;
  std::vector<at::Tensor> initial_;  // on the CPU
  std::vector<std::size_t> ready_order_;
  std::vector<BackwardStage> stages_;
  sim::ComputeCost forward_cost_;

  std::shared_ptr<const LabelledData> data_;
  at::Generator gen_;
  at::Tensor shard_, epoch_order_;
  std::int64_t cursor_ = 0, batch_ = 0;
  at::Tensor loss_;  // of the last forward, until backward stage 0 consumes its graph
};

}  // namespace dtsim::workloads
