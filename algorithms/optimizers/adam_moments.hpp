// The two operations of torch.optim.Adam that PyTorch 2.x writes differently from 1.13,
// with other roundings, as the PyTorch whose LibTorch dtsim is built with writes them: so
// adam/adamw (adam.cpp) and 1-bit Adam's warm-up (one_bit_adam.cpp) give torch.optim's
// bits on both (tests/optimizers_test.cpp, OptimizersAgainstPyTorch).
#pragma once

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cmath>

namespace dtsim::algorithms::optimizers {

inline constexpr bool kTorchOptim2 = TORCH_VERSION_MAJOR >= 2;

// m = b1 m + (1 - b1) g: 2.x m.lerp_(g, 1 - b1); 1.13 m.mul_(b1).add_(g, 1 - b1).
inline void adam_first_moment_(at::Tensor& m, const at::Tensor& g, double beta1) {
  if constexpr (kTorchOptim2)
    m.lerp_(g, 1.0 - beta1);
  else
    m.mul_(beta1).add_(g, 1.0 - beta1);
}

// sqrt(1 - b2^t), computed in double: 2.x (1 - b2^t) ** 0.5; 1.13 math.sqrt.
inline double adam_bias_correction2_sqrt(double bias_correction2) {
  return kTorchOptim2 ? std::pow(bias_correction2, 0.5) : std::sqrt(bias_correction2);
}

}  // namespace dtsim::algorithms::optimizers
