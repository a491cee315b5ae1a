// CPU fused flatten / unflatten: many tensors' bytes copied into (or out of) one flat
// buffer as a single parallel pass, instead of one dispatched copy per tensor.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtsim::kernels::cpu {

// Part i is elements [offsets[i], offsets[i + 1]) of the flat buffer (offsets[0] = 0,
// nondecreasing, count + 1 entries); every element is `element_size` bytes.
// pack_parts:   flat[part i] = parts[i];   unpack_parts: parts[i] = flat[part i].
// A null part is skipped (the caller copies it some other way), as is a part that *is*
// its slice of the flat buffer; parts must not otherwise overlap the buffer or each other.
// at::parallel_for splits the total into one range per thread (at least 256 KB each);
// a range may straddle parts, so a model of many small tensors costs one parallel region
// rather than one copy per tensor.
void pack_parts(void* flat, const void* const* parts, const std::int64_t* offsets, std::size_t count,
                std::size_t element_size);
void unpack_parts(const void* flat, void* const* parts, const std::int64_t* offsets, std::size_t count,
                  std::size_t element_size);

// memcpy(dst, src, bytes) over the cores, in the same way (no overlap).
void parallel_copy(void* dst, const void* src, std::int64_t bytes);

}  // namespace dtsim::kernels::cpu
