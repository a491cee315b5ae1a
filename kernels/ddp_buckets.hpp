// Gradient buckets as PyTorch's DistributedDataParallel forms them after its first
// iteration (Reducer::rebuild_buckets -> compute_bucket_assignment_by_size, with the
// tensors in the order their gradients became ready, so no re-sorting):
// - tensors are visited in gradient-ready order and appended to the open bucket;
// - the bucket closes as soon as its byte size reaches the current limit (>=, the
//   crossing tensor included), however far the crossing tensor overshoots;
// - the limits are [first_cap, cap]: the first bucket closes at first_cap, every later one
//   at cap (PyTorch's iterator over bucket_size_limits stops at the last entry);
// - the open bucket left at the end (if any) is the last bucket.
// One dtype and device here (PyTorch keeps a bucket per (dtype, device) key; dtsim's
// parameters are all fp32 on one device), and no sparse gradients (which PyTorch puts in
// buckets of their own).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dtsim::kernels {

// Buckets as lists of indices into sizes_bytes, in the order they close. Throws
// std::invalid_argument for a negative size or a cap below 0.
std::vector<std::vector<std::size_t>> ddp_buckets(std::span<const std::int64_t> sizes_bytes_in_ready_order,
                                                  std::int64_t first_cap_bytes, std::int64_t cap_bytes);

}  // namespace dtsim::kernels
