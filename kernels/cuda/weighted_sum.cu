// Weighted sum of k buffers on the GPU: the gossip mixing step sum_j w_ij x_j.
//
// Napkin math: reads k*n*4 bytes, writes n*4; memory-bound, so one grid-stride pass
// that keeps the k running products in a register. Inputs are passed by value in a
// fixed-size struct (kernel arguments), batched by kMaxInputs for larger k; batches
// after the first accumulate into `out`, preserving input order, so the result equals
// the CPU kernel's bit for bit (same fp32 multiply-add order, no FMA contraction).
#include "kernels/cuda/weighted_sum.cuh"

#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"

namespace dtsim::kernels::cuda {

namespace {

constexpr int kMaxInputs = 16;

struct Inputs {
  const float* ptr[kMaxInputs];
  float weight[kMaxInputs];
  int count;
};

__global__ void weighted_sum_kernel(float* __restrict__ out, Inputs in, int64_t n, bool accumulate) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = accumulate ? out[i] : __fmul_rn(in.weight[0], in.ptr[0][i]);
    for (int j = accumulate ? 0 : 1; j < in.count; ++j) acc = __fadd_rn(acc, __fmul_rn(in.weight[j], in.ptr[j][i]));
    out[i] = acc;
  }
}

}  // namespace

void weighted_sum(float* out, const float* const* in, const float* w, int k, int64_t n, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (n == 0) return;
  if (k == 0) {
    DTSIM_CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(float), s));
    return;
  }
  const int threads = 256;
  const int blocks = grid_for(n, threads);
  for (int first = 0; first < k; first += kMaxInputs) {
    Inputs batch{};
    batch.count = k - first < kMaxInputs ? k - first : kMaxInputs;
    for (int j = 0; j < batch.count; ++j) {
      batch.ptr[j] = in[first + j];
      batch.weight[j] = w[first + j];
    }
    weighted_sum_kernel<<<blocks, threads, 0, s>>>(out, batch, n, first > 0);
    DTSIM_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace dtsim::kernels::cuda
