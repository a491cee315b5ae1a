// CUDA weighted sum of k device buffers. Plain C++ interface (raw device pointers and a
// cudaStream_t passed as void*), so that it compiles with or without a CUDA LibTorch.
#pragma once

#include <cstdint>

namespace dtsim::kernels::cuda {

// out[i] = sum_j w[j] * in[j][i] for j in input order, launched on `stream`
// (a cudaStream_t). `in` and `w` are host arrays of k entries; `in[j]` device pointers.
void weighted_sum(float* out, const float* const* in, const float* w, int k, int64_t n, void* stream);

}  // namespace dtsim::kernels::cuda
