// algorithms::BackwardPass: the backward pass of a step as stages, for the algorithms that
// overlap communication with it (DistOpt, DDP).
#pragma once

#include <cstddef>
#include <vector>

#include "sim/task.hpp"

namespace dtsim::algorithms {

// The backward pass of the current step, for algorithms that overlap communication with
// it (Algorithm::drives_backward). Stage k computes the gradients of stage_params(k) into
// StepContext::grads and advances the rank's clock by the stage's compute time; stages run
// in order 0..stages()-1, each exactly once per step.
class BackwardPass {
 public:
  virtual ~BackwardPass() = default;
  virtual std::size_t stages() const = 0;
  virtual const std::vector<std::size_t>& stage_params(std::size_t k) const = 0;
  virtual sim::Task<void> run_stage(std::size_t k) = 0;
};

// The parameter indices in the order `backward`'s stages produce their gradients (for the
// algorithms that bucket or fuse gradients as they appear: DistOpt, DDP). Throws
// std::logic_error naming `who` when a stage lists a parameter twice or out of range, or
// the stages do not produce all `n_params` gradients.
std::vector<std::size_t> gradient_ready_order(const BackwardPass& backward, std::size_t n_params, const char* who);

}  // namespace dtsim::algorithms
