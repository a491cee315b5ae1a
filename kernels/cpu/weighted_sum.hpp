#pragma once

#include <cstddef>
#include <cstdint>

namespace dtsim::kernels::cpu {

// out[i] = sum_k w[k] * in[k][i], accumulated in input order (deterministic), over
// the machine's cores in contiguous blocks.
void weighted_sum(float* out, const float* const* in, const float* w, std::size_t k, int64_t n);

}  // namespace dtsim::kernels::cpu
