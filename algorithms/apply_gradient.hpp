// The reference code's utils.apply_gradient (ChocoSGD / LocalSGD-Code pcode/optim/utils.py),
// per parameter tensor:
//
//   d = g + weight_decay * p
//   buf = d                                   on the first step
//   buf = momentum * buf + (1 - dampening) d  afterwards          (if momentum != 0)
//   d = d + momentum * buf if nesterov, else d = buf              (if momentum != 0)
//   p -= lr * d        (apply_to_model), or  g = d  (the caller applies it)
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "algorithms/algorithm.hpp"
#include "sim/compute_cost.hpp"

namespace dtsim::algorithms {

class LocalOptimizer {
 public:
  explicit LocalOptimizer(OptimizerSpec spec) : spec_(spec) {}

  void apply_gradient(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads, bool apply_to_model);
  // Roughly what apply_gradient reads, writes and computes over `elements` parameters.
  sim::ComputeCost cost(std::int64_t elements) const;
  const OptimizerSpec& spec() const { return spec_; }
  // Per-tensor momentum buffers (none before the first step, undefined without momentum); sparsified
  // SGD's mask_momentum zeroes them at the sent coordinates.
  std::vector<at::Tensor>& momentum_buffers() { return momentum_buffers_; }

 private:
  OptimizerSpec spec_;
  std::vector<at::Tensor> momentum_buffers_;  // never synchronised between ranks
};

std::int64_t total_elements(const std::vector<at::Tensor>& tensors);

}  // namespace dtsim::algorithms
