// Gather / scatter of sparse payloads, scatter-add and average on the GPU.
// Napkin math: gather and scatter move 8 bytes per kept element (index + value) plus a
// random 4-byte access into the dense buffer; average reads k * n * 4 bytes, writes n * 4.
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/compress.cuh"

namespace dtsim::kernels::cuda {

namespace {

constexpr int kMaxInputs = 16;

struct Inputs {
  const float* ptr[kMaxInputs];
  int count;
};

__global__ void gather_kernel(const float* __restrict__ x, const std::uint32_t* __restrict__ idx, std::int64_t m,
                              float scale, float* __restrict__ val) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[idx[j]];
    val[j] = scale == 1.0f ? v : __fmul_rn(v, scale);
  }
}

__global__ void scatter_kernel(const std::uint32_t* __restrict__ idx, const float* __restrict__ val, std::int64_t m,
                               float weight, bool accumulate, float* __restrict__ out) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t i = idx[j];
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, val[j])) : val[j];
  }
}

template <class I>
__global__ void first_out_of_range_kernel(const I* __restrict__ idx, std::int64_t m, std::int64_t limit,
                                          std::uint64_t base, unsigned long long* first) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const auto i = static_cast<std::int64_t>(idx[j]);
    if (i < 0 || i >= limit) atomicMin(first, static_cast<unsigned long long>(base + static_cast<std::uint64_t>(j)));
  }
}

template <class I>
void launch_first_out_of_range(const I* idx, std::int64_t m, std::int64_t limit, std::uint64_t base,
                               unsigned long long* first, void* stream) {
  if (m == 0) return;
  first_out_of_range_kernel<<<grid_for(m, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(idx, m, limit, base,
                                                                                               first);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

template <class I>
__global__ void scatter_add_kernel(const float* __restrict__ values, const I* __restrict__ idx, std::int64_t m,
                                   float* dense, std::int64_t n) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const auto i = static_cast<std::int64_t>(idx[j]);
    if (i >= 0 && i < n) atomicAdd(dense + i, values[j]);
  }
}

// Sums a batch of inputs into out (accumulating after the first batch); the last batch
// divides by k, so the order is (((x0 + x1) + x2) + ...) / k as on the CPU.
__global__ void average_kernel(float* __restrict__ out, Inputs in, std::int64_t n, bool accumulate, bool last, float k) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float acc = accumulate ? out[i] : in.ptr[0][i];
    for (int j = accumulate ? 0 : 1; j < in.count; ++j) acc = __fadd_rn(acc, in.ptr[j][i]);
    out[i] = last ? __fdiv_rn(acc, k) : acc;
  }
}

__global__ void add_scaled_kernel(const float* __restrict__ v, std::int64_t n, float weight, float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = __fadd_rn(out[i], __fmul_rn(weight, v[i]));
}

template <class I>
void launch_scatter_add(const float* values, const I* idx, std::int64_t m, float* dense, std::int64_t n,
                        void* stream) {
  if (m == 0) return;
  scatter_add_kernel<<<grid_for(m, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(values, idx, m, dense, n);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gather(const float* x, const std::uint32_t* idx, std::int64_t m, float scale, float* val, void* stream) {
  if (m == 0) return;
  gather_kernel<<<grid_for(m, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, idx, m, scale, val);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void scatter(const std::uint32_t* idx, const float* val, std::int64_t m, float weight, bool accumulate, float* out,
             void* stream) {
  if (m == 0) return;
  scatter_kernel<<<grid_for(m, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(idx, val, m, weight, accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void first_out_of_range(const std::uint32_t* idx, std::int64_t m, std::int64_t limit, std::uint64_t base,
                        unsigned long long* first, void* stream) {
  launch_first_out_of_range(idx, m, limit, base, first, stream);
}
void first_out_of_range(const std::int64_t* idx, std::int64_t m, std::int64_t limit, std::uint64_t base,
                        unsigned long long* first, void* stream) {
  launch_first_out_of_range(idx, m, limit, base, first, stream);
}
void first_out_of_range(const std::int32_t* idx, std::int64_t m, std::int64_t limit, std::uint64_t base,
                        unsigned long long* first, void* stream) {
  launch_first_out_of_range(idx, m, limit, base, first, stream);
}

void scatter_add(const float* values, const std::int64_t* idx, std::int64_t m, float* dense, std::int64_t n,
                 void* stream) {
  launch_scatter_add(values, idx, m, dense, n, stream);
}
void scatter_add(const float* values, const std::int32_t* idx, std::int64_t m, float* dense, std::int64_t n,
                 void* stream) {
  launch_scatter_add(values, idx, m, dense, n, stream);
}

void add_scaled(const float* v, std::int64_t n, float weight, float* out, void* stream) {
  if (n == 0) return;
  add_scaled_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(v, n, weight, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void average(float* out, const float* const* in, int k, std::int64_t n, void* stream) {
  if (n == 0 || k == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  for (int first = 0; first < k; first += kMaxInputs) {
    Inputs batch{};
    batch.count = k - first < kMaxInputs ? k - first : kMaxInputs;
    for (int j = 0; j < batch.count; ++j) batch.ptr[j] = in[first + j];
    average_kernel<<<grid_for(n, 256), 256, 0, s>>>(out, batch, n, first > 0, first + batch.count == k,
                                                    static_cast<float>(k));
    DTSIM_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace dtsim::kernels::cuda
