// What a compressor kind's device twin (cuda_codec.hpp) takes: the compress call and the
// decode the Compressor's CUDA path (compressor_cuda.cpp) plans, and the helpers the twins
// share. Each twin is defined beside its kind's CPU codec, under DTSIM_TORCH_CUDA. Internal
// to kernels/.
#pragma once

#if DTSIM_TORCH_CUDA
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/cuda/compress.cuh"

namespace dtsim::kernels::codecs {

// Host tables copied to the front of the device workspace, and scratch regions after them.
struct DeviceTables {
  std::int64_t offsets = 0, slot_begin = 0, keys = 0, segment_factors = 0, partials = 0, norms = 0, counts = 0, indices = 0,
               select = 0, total = 0;
};

// A compress call on the device: the input, its segment tables (host and device) and the
// planned device workspace.
struct CudaCompress {
  const CompressorSpec& spec;
  Workspace& ws;
  const float* x;
  std::int64_t n, L, K;
  const std::int64_t* off;     // host offsets (ws.offsets)
  const std::int64_t* d_off;   // device offsets
  const std::int64_t* d_slot;  // device slot_begin
  std::int64_t slots;
  float* partials;
  std::uint8_t* dev;  // the device workspace, laid out as `t`
  const DeviceTables& t;
  at::Device device;
  cudaStream_t stream;
};

// A decode on the device: the payload's bytes, the dense output and the device scratch
// (the offsets at its front, the index check's word at flag_at, redrawn indices at idx_at).
struct CudaDecode {
  const CompressorSpec& spec;
  Workspace& ws;
  const Payload& payload;
  const std::uint8_t* base;  // payload bytes (device)
  std::int64_t n, L, K_fixed;
  const std::int64_t* off;    // host offsets
  const std::int64_t* d_off;  // device offsets
  float* o;
  float weight;
  bool accumulate;
  std::uint8_t* dev;
  std::int64_t flag_at, idx_at;
  cudaStream_t stream;
  const char* what;
};

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: CUDA error {}", what, cudaGetErrorString(e)));
}

inline std::int64_t align256(std::int64_t b) { return (b + 255) / 256 * 256; }

// Checks every index against its segment, as the CPU decoders do before writing anything,
// then scatters (segment s's indices and values are [k[s], k[s + 1]) of idx and val).
void scatter_segments(const CudaDecode& d, const std::uint32_t* idx, const float* val);
// K uint32 indices, then K values (top_k, random_k without shared_seed).
void indices_then_values_decode(const CudaDecode& d);

}  // namespace dtsim::kernels::codecs
#endif  // DTSIM_TORCH_CUDA
