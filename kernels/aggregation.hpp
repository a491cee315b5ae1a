// Aggregation kernels, dispatched by the tensors' device to kernels/cpu or kernels/cuda.
#pragma once

#include <ATen/ATen.h>

#include <span>

namespace dtsim::kernels {

// out = sum_k weights[k] * inputs[k]: the gossip mixing step sum_j w_ij x_j.
// All tensors contiguous fp32 of out's size, on out's device. `out` may alias no input.
// The sum runs in input order, so the result is deterministic.
void weighted_sum(at::Tensor& out, std::span<const at::Tensor> inputs, std::span<const double> weights);

}  // namespace dtsim::kernels
