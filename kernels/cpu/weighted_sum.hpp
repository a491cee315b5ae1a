// CPU dense aggregation: the weighted (gossip) sum and the average of k buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtsim::kernels::cpu {

// out[i] = sum_k w[k] * in[k][i], accumulated in input order (deterministic), over
// the machine's cores in contiguous blocks.
void weighted_sum(float* out, const float* const* in, const float* w, std::size_t k, int64_t n);

// out_i = (in[0]_i + in[1]_i + ... + in[k-1]_i) / k, summed in input order, then one fp32
// division by k.
void average(float* out, const float* const* in, std::int64_t k, std::int64_t n);

}  // namespace dtsim::kernels::cpu
