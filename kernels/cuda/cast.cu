// fp32 <-> fp16 / bf16 on the GPU, bit-identical to kernels/cpu/cast.cpp (round to
// nearest even; fp16 NaN = sign | 0x7E00, bf16 NaN = 0x7FC0). Napkin math: 4 bytes read,
// 2 written per element; one grid-stride pass.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/compress.cuh"

namespace dtsim::kernels::cuda {

namespace {

__global__ void to_half_kernel(const float* __restrict__ x, std::int64_t n, std::uint16_t* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const std::uint32_t b = __float_as_uint(v);
    out[i] = isnan(v) ? static_cast<std::uint16_t>(((b >> 16) & 0x8000u) | 0x7E00u) : __half_as_ushort(__float2half_rn(v));
  }
}

__global__ void to_bf16_kernel(const float* __restrict__ x, std::int64_t n, std::uint16_t* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t b = __float_as_uint(x[i]);
    const bool nan = (b & 0x7FFFFFFFu) > 0x7F800000u;
    out[i] = nan ? static_cast<std::uint16_t>(0x7FC0u) : static_cast<std::uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
  }
}

__global__ void from_half_kernel(const std::uint16_t* __restrict__ h, std::int64_t n, float weight, bool accumulate,
                                 float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = __half2float(__ushort_as_half(h[i]));
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

__global__ void from_bf16_kernel(const std::uint16_t* __restrict__ h, std::int64_t n, float weight, bool accumulate,
                                 float* __restrict__ out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = __uint_as_float(static_cast<std::uint32_t>(h[i]) << 16);
    out[i] = accumulate ? __fadd_rn(out[i], __fmul_rn(weight, v)) : v;
  }
}

}  // namespace

void float_to_half(const float* x, std::int64_t n, std::uint16_t* out, void* stream) {
  if (n == 0) return;
  to_half_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, n, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}
void float_to_bfloat16(const float* x, std::int64_t n, std::uint16_t* out, void* stream) {
  if (n == 0) return;
  to_bf16_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, n, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}
void half_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out, void* stream) {
  if (n == 0) return;
  from_half_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(h, n, weight, accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}
void bfloat16_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out,
                       void* stream) {
  if (n == 0) return;
  from_bf16_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(h, n, weight, accumulate, out);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dtsim::kernels::cuda
