// workloads::ShardBatches: one rank's mini-batches over its shard of the training set.
//
// Each epoch visits the shard's samples in a fresh random order, drawn from the
// workload's generator when the previous order runs out, `batch` samples at a time; the
// partial batch at the end of an epoch is dropped (as the reference's loader with
// drop_last does), so every step sees a full batch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include <ATen/ATen.h>

namespace dtsim::workloads {

class ShardBatches {
 public:
  ShardBatches() = default;
  // `shard`: the rank's sample indices (CPU, int64); the batch is at most the shard.
  ShardBatches(at::Tensor shard, std::int64_t batch_size)
      : shard_(std::move(shard)), batch_(std::min(batch_size, shard_.numel())) {}

  std::int64_t samples() const { return shard_.numel(); }
  std::int64_t batch() const { return batch_; }

  // The next batch's sample indices, on `device`.
  at::Tensor next(at::Generator& gen, const at::Device& device) {
    if (!epoch_order_.defined() || cursor_ + batch_ > epoch_order_.numel()) {
      epoch_order_ = shard_.index_select(0, at::randperm(shard_.numel(), gen, at::kLong));
      cursor_ = 0;
    }
    auto idx = epoch_order_.narrow(0, cursor_, batch_).to(device);
    cursor_ += batch_;
    return idx;
  }

 private:
  at::Tensor shard_, epoch_order_;
  std::int64_t batch_ = 0, cursor_ = 0;
};

}  // namespace dtsim::workloads
