// Aggregation kernels, dispatched by the tensors' device to kernels/cpu or kernels/cuda.
#pragma once

#include <ATen/ATen.h>

#include <span>

namespace dtsim::kernels {

// out = sum_k weights[k] * inputs[k]: the gossip mixing step sum_j w_ij x_j.
// All tensors contiguous fp32 of out's size, on out's device. `out` may alias no input.
// The sum runs in input order, so the result is deterministic.
void weighted_sum(at::Tensor& out, std::span<const at::Tensor> inputs, std::span<const double> weights);

// out = (inputs[0] + inputs[1] + ... + inputs[k-1]) / k: summed in input order, then one
// fp32 division by k (deterministic, equal on CPU and GPU). Same requirements as
// weighted_sum; at least one input.
void average(at::Tensor& out, std::span<const at::Tensor> inputs);

// dense[indices[j]] += values[j], for j in order: the sum of many ranks' sparse
// (values, indices) messages into one dense buffer (concatenate them, or call once per
// rank). values: contiguous fp32 [m]; indices: contiguous int64 or int32 [m] of flat
// indices into dense (contiguous fp32), all on dense's device. Throws
// std::invalid_argument naming the first index outside [0, dense.numel()) (on the CPU
// the entries before it have been added; on the GPU, which checks first, none). On the
// GPU repeated indices within one call are added with atomics, in no set order, so
// their sum may differ from the CPU's in rounding; distinct indices agree bit for bit
// (one call per rank keeps the ranks' order).
void scatter_add(const at::Tensor& values, const at::Tensor& indices, at::Tensor& dense);

}  // namespace dtsim::kernels
