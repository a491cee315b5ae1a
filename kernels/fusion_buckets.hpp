// Grouping gradient tensors into fusion buckets under a size threshold, with Apache
// SINGA's DistOpt rule (fused_synch): tensors are visited in backward order;
// - a tensor with more than `threshold` elements is a bucket of its own, at once, and
//   does not flush the group being staged;
// - smaller tensors are staged into a group; when the staged element count exceeds the
//   threshold (strictly, the crossing tensor included) the group closes;
// - the group left over at the end is the last bucket.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dtsim::kernels {

// Buckets as lists of indices into tensor_sizes, in the order they close.
// Throws std::invalid_argument for a negative size or threshold.
std::vector<std::vector<std::size_t>> fusion_buckets(std::span<const std::int64_t> tensor_sizes_in_backward_order,
                                                     std::int64_t threshold);

}  // namespace dtsim::kernels
