// CPU fused flatten / unflatten: many tensors' bytes copied into (or out of) one flat
// buffer as a single parallel pass, instead of one dispatched copy per tensor.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtsim::kernels::cpu {

// Part i is elements [offsets[i], offsets[i + 1]) of the flat buffer (offsets[0] = 0,
// nondecreasing, count + 1 entries); every element is `element_size` bytes.
// gather:  flat[part i] = parts[i];   scatter: parts[i] = flat[part i].
// Parts must not overlap the flat buffer partially (a part that *is* its slice of the
// flat buffer is skipped). The total is cut into chunks of about 256 KB spread over the
// cores; a chunk may straddle parts, so a model of many small tensors costs one parallel
// region rather than one per tensor.
void gather(void* flat, const void* const* parts, const std::int64_t* offsets, std::size_t count,
            std::size_t element_size);
void scatter(const void* flat, void* const* parts, const std::int64_t* offsets, std::size_t count,
             std::size_t element_size);

// memcpy(dst, src, bytes) over the cores, in the same 256 KB chunks (no overlap).
void parallel_copy(void* dst, const void* src, std::int64_t bytes);

}  // namespace dtsim::kernels::cpu
