// workloads::Workload: one rank's model and data, with real forward and backward passes.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "sim/compute_cost.hpp"

namespace dtsim::workloads {

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

  // Loss and accuracy of `params` on the whole training set (all ranks' shards).
  virtual Evaluation evaluate(const std::vector<at::Tensor>& params) const = 0;
};

}  // namespace dtsim::workloads
