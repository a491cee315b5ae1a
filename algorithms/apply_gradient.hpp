// The reference code's utils.apply_gradient (ChocoSGD / LocalSGD-Code pcode/optim/utils.py),
// per parameter tensor:
//
//   d = g + weight_decay * p                  (none on tensors whose name contains "bn": the
//                                             reference's parameter groups)
//   d = (c / |d|_2) d  if |d|_2 >= c          (clip_norm c > 0 only: the reference DGC's
//                                             per-tensor clipping)
//   buf = d                                   on the first step
//   buf = momentum * buf + (1 - dampening) d  afterwards          (if momentum != 0)
//   d = d + momentum * buf if nesterov, else d = buf              (if momentum != 0)
//   p -= lr * d        (apply_gradient: the reference's apply_grad_to_model), or
//   g = d              (transform_gradient: the caller applies it)
// lr is the step's (StepContext::lr, from the lr schedule), never OptimizerSpec::lr.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithm_spec.hpp"
#include "sim/compute_cost.hpp"

namespace dtsim::algorithms {

class LocalOptimizer {
 public:
  // spec.weight_decay_mask (if not empty) has one entry per tensor of the params passed to
  // apply_gradient / transform_gradient.
  explicit LocalOptimizer(OptimizerSpec spec);

  // p -= lr d.
  void apply_gradient(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads, double lr);
  // g = d, the model untouched.
  void transform_gradient(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads);
  // Roughly what apply_gradient reads, writes and computes over `elements` parameters.
  sim::ComputeCost cost(std::int64_t elements) const;
  const OptimizerSpec& spec() const { return spec_; }
  // Per-tensor momentum buffers (none before the first step, undefined without momentum); sparsified
  // SGD's mask_momentum zeroes them at the sent coordinates.
  std::vector<at::Tensor>& momentum_buffers() { return momentum_buffers_; }

 private:
  // d (weight decay, momentum) of every tensor: into p with -lr when `lr` is set, else into g.
  void update(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads, std::optional<double> lr);

  OptimizerSpec spec_;
  std::vector<at::Tensor> momentum_buffers_;  // never synchronised between ranks
};

// The reference's parameter groups (pcode/create_optimizer.py): no weight decay on a tensor
// whose name contains "bn" (its batch-norm weights and biases). One entry per name.
std::vector<bool> weight_decay_mask(const std::vector<std::string>& names);

std::int64_t total_elements(const std::vector<at::Tensor>& tensors);

}  // namespace dtsim::algorithms
