// PyTorch's powerSGD_hook (powerSGD_hook.py, PowerSGDState; Vogels et al., NeurIPS 2019) over
// each bucket (powersgd.hpp has the maths):
//   while iter < start_powerSGD_iter (iter = t - 1): the allreduce hook. Then, per bucket:
//     M = b (+ e with use_error_feedback); keep a copy M0 = M
//     each tensor viewed as an n x m matrix (first dim x the rest), r = min(n, m,
//     matrix_approximation_rank); compressed iff n m > (n + m) r min_compression_rate
//     (so 1-D tensors never are); the others, concatenated, are all-reduced and / W
//     Q: drawn N(0, 1) the first time (every step without warm_start), else the
//     previous step's Q; orthogonalized (Gram-Schmidt, epsilon as PyTorch)
//     P = M Q; P <- sum_r P^r (no / W: P is orthogonalized next); orthogonalize(P)
//     Q = M^T P; Q <- (sum_r Q^r) / W; M <- P Q^T (written into b)
//     e = M0 - b (error_feedback; on the uncompressed part this is the rank's
//     deviation from the average, which sums to zero over ranks, as in PyTorch)
// The uncompressed tensors' all-reduce and Q's are averages (sum in rank order, then / W;
// PyTorch: sum, then / W: identical). Q's draws come from the hook's NumPy RandomState
// (random_seed, default 0 as PyTorch's PowerSGDState) advanced in bucket order, the same on
// every rank; PyTorch seeds torch.manual_seed from it for each bucket, a stream dtsim does
// not reproduce. As PyTorch, start_powerSGD_iter must be > 1 with error feedback or warm start.
//
// Timing: a full bucket's error add, copy, Q draw or orthogonalization and P = M Q run on
// the rank at once (sync/compress) and its uncompressed and P all-reduces go on the
// communication stream, overlapping the rest of backward. The second half needs P's sum,
// and every rank must issue its collectives in the same order (emulated collectives are
// matched by call order; so are Gloo's), so it runs after backward, bucket by bucket: wait
// for P (sync/sync), orthogonalize P and Q = M^T P (sync/compress), issue Q's all-reduce
// (queued behind the P all-reduces still on the stream); then each Q's wait (sync/sync) and
// P Q^T plus the error (sync/compress), overlapping the later Qs. A side coroutine per rank
// (sim::Engine::spawn) would let this overlap backward too, but the order of its Q
// all-reduces among the P all-reduces would then depend on each rank's timing (stragglers,
// measured compute), and its compute would overlap the rank's own on one clock.
//
// n_bits: 32 (n + m) r per compressed matrix plus 32 per uncompressed element (32 per
// element in the plain phase).
#pragma once

#include "algorithms/ddp_hook.hpp"
#include "algorithms/numpy_random_state.hpp"
#include "algorithms/powersgd.hpp"
#include "algorithms/powersgd_options.hpp"

namespace dtsim::algorithms {

class PowerSgdHook final : public DdpHook {
 public:
  // Throws std::logic_error naming the field for a setting PyTorch refuses.
  explicit PowerSgdHook(const PowerSgdOptions& options);
  void init(std::span<const DdpBucket> buckets, std::span<const at::Tensor> params) override;
  sim::Task<std::uint64_t> bucket_ready(DdpHookStep& step, std::size_t b, std::vector<std::vector<comm::Op>>& ops) override;
  sim::Task<void> after_backward(DdpHookStep& step, std::vector<std::vector<comm::Op>>& ops) override;
  std::uint64_t state_bytes() const override;

  // Bucket b's PowerSGD state: its P and Q (ps(), qs() in compressed_order(), indices into
  // the bucket's slots).
  const PowerSgdGroup& group(std::size_t b) const { return groups_.at(b); }

 private:
  bool compresses(const DdpHookStep& step) const { return step.iteration >= start_iter_; }

  PowerSgdSettings settings_;
  std::int64_t start_iter_;
  NumpyRandomState random_;  // the draws of Q, as the hook's np.random.RandomState(random_seed)
  std::vector<PowerSgdGroup> groups_;
};

}  // namespace dtsim::algorithms
