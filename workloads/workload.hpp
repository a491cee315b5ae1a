// workloads::Workload: one rank's model and data, with real forward and backward passes.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/compute_cost.hpp"

namespace dtsim::workloads {

// One piece of the backward pass: it computes the gradients of `params` (indices into the
// parameter list) at compute cost `cost`. A workload's stages, in order, are the order in
// which backward produces its gradients (roughly reverse layer order), so an optimizer
// that overlaps communication with backward (SINGA's DistOpt) sees each gradient appear
// at the simulated time the backward pass would produce it.
struct BackwardStage {
  std::vector<std::size_t> params;
  sim::ComputeCost cost;
};

// One rank's data as its steps draw it: a shard of `samples` (0: no data, as the shape-only
// models), `batch` of them per step (the whole shard for full batch; 0: unknown). The
// learning-rate schedule counts an epoch as ceil(samples / batch) steps.
struct DataShard {
  std::int64_t samples = 0;
  std::int64_t batch = 0;
};

struct Evaluation {
  double loss = 0.0;
  double accuracy = 0.0;  // fraction in [0, 1]
};

class Workload {
 public:
  virtual ~Workload() = default;

  // Parameters every rank starts from (identical on all ranks, from the scenario seed).
  virtual std::vector<at::Tensor> initial_parameters() const = 0;
  virtual std::vector<std::string> parameter_names() const = 0;

  // Forward pass on this rank's next mini-batch; returns its mean loss.
  virtual double forward(const std::vector<at::Tensor>& params) = 0;
  // Backward pass of the last forward: writes d loss / d param into `grads`.
  virtual void backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) = 0;
  virtual sim::ComputeCost forward_cost() const = 0;
  virtual sim::ComputeCost backward_cost() const = 0;
  virtual DataShard data_shard() const { return {}; }

  // The backward pass as stages (see BackwardStage). Running backward_stage(k) for every k
  // in order after a forward pass writes the same gradients as backward(). The default is
  // one stage that produces every gradient at backward_cost().
  virtual std::vector<BackwardStage> backward_stages() const {
    BackwardStage all{{}, backward_cost()};
    for (std::size_t i = 0; i < initial_parameters().size(); ++i) all.params.push_back(i);
    return {all};
  }
  virtual void backward_stage(std::size_t k, const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) {
    if (k != 0) throw std::out_of_range("backward_stage: this workload has one backward stage");
    backward(params, grads);
  }

  // Whether forward() and evaluate() compute a real loss and accuracy. The shape-only
  // models (shape_models.hpp) have no data and no real math: their runs report no loss
  // or accuracy at all (null), never a 0 that a target or a plot would take as reached.
  virtual bool computes_loss() const { return true; }

  // Loss and accuracy of `params` on the whole training set (all ranks' shards).
  virtual Evaluation evaluate(const std::vector<at::Tensor>& params) const = 0;
  // Loss and accuracy on the held-out test set, for workloads that have one.
  virtual std::optional<Evaluation> evaluate_test(const std::vector<at::Tensor>& /*params*/) const {
    return std::nullopt;
  }
};

}  // namespace dtsim::workloads
