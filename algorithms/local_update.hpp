// algorithms::LocalUpdate: a rank's own parameter update from the gradient it holds (the
// all-reduced average in centralized SGD, its own in D-PSGD): the reference's
// apply_gradient with the algorithm-level SGD fields (lr, momentum, dampening,
// weight_decay, nesterov), or, where the scenario gives an optimizer object
// (/algorithm/optimizer, e.g. {"name": "adamw", "weight_decay": 0.1}), that optimizer
// (optimizers/: sgd, adam, adamw as torch.optim). With adamw, centralized parallel SGD is
// data-parallel AdamW: every rank applies AdamW to the same averaged gradient.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "algorithms/algorithm_spec.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/optimizers/optimizer.hpp"
#include "config/object_reader.hpp"
#include "sim/compute_cost.hpp"

namespace dtsim::algorithms {

class LocalUpdate {
 public:
  // `object`: the scenario's optimizer object, if any (else the reference's SGD from spec.optimizer).
  LocalUpdate(const AlgorithmSpec& spec, const std::optional<optimizers::OptimizerConfig>& object);

  // p -= lr d (the reference's SGD), or the optimizer object's step at `lr`.
  void apply(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads, double lr);
  sim::ComputeCost cost(std::int64_t elements) const;
  // The optimizer object's state (Adam's moments); the reference's momentum buffers are not
  // counted, as before optimizer objects existed.
  std::uint64_t state_bytes() const { return object_ ? object_->state_bytes() : 0; }

 private:
  LocalOptimizer sgd_;
  std::unique_ptr<optimizers::Optimizer> object_;
};

// An optimizer for a rank (a local, inner or outer one): `config` with the training loop's
// weight-decay mask (the reference's parameter groups, OptimizerSpec::weight_decay_mask).
std::unique_ptr<optimizers::Optimizer> make_rank_optimizer(optimizers::OptimizerConfig config, const AlgorithmSpec& spec);

// For the memory footprints: model-sized buffers an optimizer keeps beyond the one momentum
// buffer the resource estimate already counts (Adam's v, and v_max with AMSGrad; SGD none).
double extra_optimizer_buffers(const optimizers::OptimizerConfig& c);

// /algorithm/optimizer, where the scenario gives it. The optimizer object replaces the
// algorithm-level SGD fields, so those must keep their defaults beside it (lr and
// lr_schedule stay at the algorithm level: the object's step runs at the scheduled lr).
std::optional<optimizers::OptimizerConfig> parse_optimizer_object(config::ObjectReader& a, const OptimizerSpec& sgd_fields);

}  // namespace dtsim::algorithms
