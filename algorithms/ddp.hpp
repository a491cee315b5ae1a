// PyTorch's DistributedDataParallel (torch/nn/parallel/distributed.py, the C++ Reducer)
// with its built-in communication hooks (torch/distributed/algorithms/ddp_comm_hooks:
// default_hooks.py, powerSGD_hook.py). Rank i of W, gradients in the order backward
// produces them (the workload's backward stages):
//
//   buckets B_1..B_K = ddp_buckets(4 numel in ready order, first_bucket_mb, bucket_cap_mb)
//                      from step 1 (PyTorch buckets its first iteration over the reversed
//                      parameter order, then rebuilds them in ready order; with backward
//                      in reverse layer order the two agree up to the order within a layer)
//   as each g_j appears: copy it into its bucket's flat fp32 buffer b; when the bucket is
//   full, run the hook on b, its collectives on the rank's communication stream:
//   allreduce      b <- (sum_r b^r) / W
//   fp16_compress  h = fp16(b) / W (in fp16, as PyTorch: cast, then divide);
//                  h <- sum_r h^r (fp16 all-reduce, each addition rounded to fp16); b <- fp32(h)
//   bf16_compress  the same in bfloat16
//   powersgd       (Vogels et al., NeurIPS 2019; PyTorch's PowerSGDState / powerSGD_hook)
//                  while iter < start_powerSGD_iter (iter = t - 1): allreduce. Then, per bucket:
//                    M = b (+ e with use_error_feedback); keep a copy M0 = M
//                    each tensor viewed as an n x m matrix (first dim x the rest), r = min(n, m,
//                    matrix_approximation_rank); compressed iff n m > (n + m) r min_compression_rate
//                    (so 1-D tensors never are); the others, concatenated, are all-reduced and / W
//                    Q: drawn N(0, 1) the first time (every step without warm_start), else the
//                    previous step's Q; orthogonalized (Gram-Schmidt, epsilon as PyTorch)
//                    P = M Q; P <- sum_r P^r (no / W: P is orthogonalized next); orthogonalize(P)
//                    Q = M^T P; Q <- (sum_r Q^r) / W; M <- P Q^T (written into b)
//                    e = M0 - b (error_feedback; on the uncompressed part this is the rank's
//                    deviation from the average, which sums to zero over ranks, as in PyTorch)
//   after backward: wait for the stream, copy every bucket back into the gradients, then
//   the local optimizer step (weight decay, momentum) with g.
//
// Reductions: the allreduce hook uses comm::ReduceOp::Average (sum in rank order, then / W,
// as centralized parallel SGD), where PyTorch's allreduce_hook divides each rank's buffer
// by W first; the two agree bit for bit when W is a power of two. The same for PowerSGD's
// uncompressed tensors, Q and its plain all-reduce phase (PyTorch: sum, then / W: identical).
// Q's draws come from one at::Generator (CPU, seeded with random_seed, default 0 as
// PyTorch's PowerSGDState) advanced in bucket order, the same on every rank; PyTorch seeds
// torch.manual_seed from a numpy RandomState(0) for each bucket, a stream dtsim does not
// reproduce. As PyTorch, start_powerSGD_iter must be > 1 with error feedback or warm start.
//
// Timing: the staging copies are charged as each gradient appears (sync/get_data); a
// full bucket's hook compute (casts; PowerSGD's error add, copy, Q draw or
// orthogonalization and P = M Q: sync/compress) runs on the rank at once and its
// collectives go on the communication stream (Communicator::stream_all_reduce: one at a
// time per rank, in issue order), overlapping the rest of backward. PowerSGD's second
// half needs P's sum, and every rank must issue its collectives in the same order (emulated
// collectives are matched by call order; so are Gloo's), so it runs after backward, bucket
// by bucket: wait for P (sync/sync), orthogonalize P and Q = M^T P (sync/compress), issue
// Q's all-reduce (queued behind the P all-reduces still on the stream); then each Q's
// wait (sync/sync) and P Q^T plus the error (sync/compress), overlapping the later Qs.
// A side coroutine per rank (sim::Engine::spawn) would let this overlap backward too,
// but the order of its Q all-reduces among the P all-reduces would then depend on each
// rank's timing (stragglers, measured compute), and its compute would overlap the rank's
// own on one clock. Then sync/unflatten_grad and sync/apply_grad.
//
// n_bits per step: 32 per fp32 element all-reduced (allreduce, PowerSGD's plain phase),
// 16 per element (fp16 / bf16), PowerSGD: 32 (n + m) r per compressed matrix plus 32 per
// uncompressed element.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/powersgd.hpp"

namespace dtsim::algorithms {

// bucket_cap_mb / first_bucket_mb in bytes as PyTorch converts them: int(mb * 1024 * 1024).
std::int64_t ddp_cap_bytes(double mb);

// DDP's own scenario fields (AlgorithmSpec::settings).
struct DdpSettings {
  std::string hook = "allreduce";  // "allreduce", "fp16_compress", "bf16_compress" or "powersgd"
  double bucket_cap_mb = 25.0;     // every bucket after the first closes at this size (MB = 2^20 bytes)
  double first_bucket_mb = 1.0;    // the first bucket's cap (PyTorch's _DEFAULT_FIRST_BUCKET_BYTES)
  PowerSgdOptions powersgd;        // the powersgd hook's
};

class Ddp final : public Algorithm {
 public:
  enum class Hook { allreduce, fp16_compress, bf16_compress, powersgd };

  // Throws std::logic_error naming the field for an unknown hook or a PowerSGD setting
  // PyTorch refuses (the loader refuses them first, with their JSON path).
  explicit Ddp(const AlgorithmSpec& spec);
  Ddp(const AlgorithmSpec& spec, const DdpSettings& settings);

  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  bool drives_backward() const override { return true; }
  std::uint64_t state_bytes() const override;

  // One tensor of a bucket: its parameter, and PowerSGD's view of it (r = 0 under the
  // other hooks).
  struct Slot : PowerSgdSlot {
    std::size_t param = 0;  // index into the parameters
  };
  struct Bucket {
    std::vector<Slot> slots;   // in ready order
    std::int64_t elements = 0;
    at::Tensor buffer;         // fp32, PyTorch's bucket.buffer()
    at::Tensor wire;           // fp16 / bf16 hooks: the payload
    PowerSgdGroup powersgd;    // the powersgd hook's state over this bucket
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // PowerSGD's state.iter: steps completed.
  std::int64_t iteration() const { return iter_; }
  // The compressed tensors' P and Q of bucket b (n x r and m x r views, in slot order).
  std::vector<at::Tensor> ps(std::size_t b) const { return buckets_.at(b).powersgd.ps(); }
  std::vector<at::Tensor> qs(std::size_t b) const { return buckets_.at(b).powersgd.qs(); }

 private:
  void init(const StepContext& ctx);

  Hook hook_;
  std::int64_t first_cap_, cap_;
  PowerSgdSettings powersgd_;
  std::int64_t start_iter_;
  NumpyRandomState random_;  // PowerSGD's draws, as the hook's np.random.RandomState(random_seed)
  LocalOptimizer optimizer_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_, slot_of_;  // per parameter
  std::int64_t iter_ = 0;
};

}  // namespace dtsim::algorithms
