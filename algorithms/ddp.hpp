// PyTorch's DistributedDataParallel (torch/nn/parallel/distributed.py, the C++ Reducer)
// with a communication hook (ddp_hook.hpp; the hooks in ddp_hooks/: allreduce,
// fp16_compress, bf16_compress, powersgd). Rank i of W, gradients in the order backward
// produces them (the workload's backward stages):
//
//   buckets B_1..B_K = ddp_buckets(4 numel in ready order, first_bucket_mb, bucket_cap_mb)
//                      from step 1 (PyTorch buckets its first iteration over the reversed
//                      parameter order, then rebuilds them in ready order; with backward
//                      in reverse layer order the two agree up to the order within a layer)
//   as each g_j appears: copy it into its bucket's flat fp32 buffer b; when the bucket is
//   full, run the hook on b: its compute on the rank, its collectives on the rank's
//   communication stream (Communicator::stream_all_reduce: one at a time per rank, in
//   issue order), overlapping the rest of backward
//   after backward: the hook's end (by default a wait for the stream), copy every bucket's
//   average back into the gradients, then the local optimizer step (weight decay,
//   momentum) with g.
//
// Timing: the staging copies are charged as each gradient appears (sync/get_data), the
// hooks' compute as sync/compress, the waits as sync/sync, then sync/unflatten_grad and
// sync/apply_grad. n_bits per step: the hooks' (32 per fp32 element all-reduced).
#pragma once

#include <ATen/ATen.h>

#include <any>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/ddp_hook.hpp"

namespace dtsim::algorithms {

// bucket_cap_mb / first_bucket_mb in bytes as PyTorch converts them: int(mb * 1024 * 1024).
std::int64_t ddp_cap_bytes(double mb);

// DDP's own scenario fields (AlgorithmSpec::settings).
struct DdpSettings {
  std::string hook = "allreduce";  // a name in ddp_hooks()
  double bucket_cap_mb = 25.0;     // every bucket after the first closes at this size (MB = 2^20 bytes)
  double first_bucket_mb = 1.0;    // the first bucket's cap (PyTorch's _DEFAULT_FIRST_BUCKET_BYTES)
  std::any hook_settings;          // what the hook's entry parsed (empty: its defaults)
};

class Ddp final : public Algorithm {
 public:
  // Throws std::logic_error naming the field for an unknown hook or settings the hook
  // refuses (the loader refuses them first, with their JSON path).
  explicit Ddp(const AlgorithmSpec& spec);
  Ddp(const AlgorithmSpec& spec, const DdpSettings& settings);

  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  bool drives_backward() const override { return true; }
  std::uint64_t state_bytes() const override { return hook_->state_bytes(); }

  const std::vector<DdpBucket>& buckets() const { return buckets_; }
  const DdpHook& hook() const { return *hook_; }
  // Steps completed (PyTorch's state.iter for the hooks).
  std::int64_t iteration() const { return iter_; }

 private:
  void init(const StepContext& ctx);

  std::unique_ptr<DdpHook> hook_;
  std::int64_t first_cap_, cap_;
  LocalOptimizer optimizer_;
  std::vector<DdpBucket> buckets_;
  std::vector<std::size_t> bucket_of_, slot_of_;  // per parameter
  std::int64_t iter_ = 0;
};

}  // namespace dtsim::algorithms
