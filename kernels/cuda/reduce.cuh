// The canonical per-segment reduction of kernels/cpu/common.hpp on the GPU (used by the
// scaled-sign scales, the QSGD norms and the one_bit means): one warp per 1024-element
// chunk, lanes summing rows in order, a shuffle-down fold, then a pairwise fold of each
// segment's partials.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dtsim::kernels::cuda {

// The summed value of each element: |x|, x^2, or one_bit's parts (detail/quantizers.hpp).
enum class ChunkOp { abs, square, non_negative_part, negative_part };

// partials[slot] for every (segment, chunk) pair (slot layout of cpu::partial_slots).
void chunk_partials(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::int64_t* slot_begin, ChunkOp op, float* partials, cudaStream_t stream);
// out[s] = pairwise fold of segment s's partials (0 for an empty segment). partials must
// hold 2 * slots floats (the second half is scratch).
void fold_partials(float* partials, std::int64_t slots, const std::int64_t* slot_begin, std::int64_t L, float* out,
                   cudaStream_t stream);

}  // namespace dtsim::kernels::cuda
