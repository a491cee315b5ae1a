// CUDA fused flatten / unflatten: the device twin of kernels/cpu/flatten.hpp. Plain C++
// interface (raw device pointers, a cudaStream_t passed as void*).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtsim::kernels::cuda {

// As cpu::pack_parts / cpu::unpack_parts (null parts skipped): `parts` and `offsets` are
// host arrays, the pointers in `parts` and `flat` device pointers. Launched on `stream`,
// one launch per 64 parts (the part table travels as kernel arguments: no upload, no
// synchronization).
void pack_parts(void* flat, const void* const* parts, const std::int64_t* offsets, std::size_t count,
                std::size_t element_size, void* stream);
void unpack_parts(const void* flat, void* const* parts, const std::int64_t* offsets, std::size_t count,
                  std::size_t element_size, void* stream);

}  // namespace dtsim::kernels::cuda
