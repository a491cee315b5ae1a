// Apache SINGA's DistOpt (python/singa/opt.py, src/io/communicator.cc; notes in
// shared/reference/singa-notes.md): synchronous data-parallel SGD whose gradient
// all-reduces overlap the backward pass. Rank i of W, tensors in backward order:
//
//   partitions P_1..P_K = distopt_partitions(sizes, threshold)    (fixed after step 1)
//   sync    as each gradient g_j appears: a tensor with more than `threshold` elements is
//           all-reduced (sum) alone at once; smaller ones are staged into a fused buffer,
//           and the group is all-reduced when its staged count exceeds the threshold (the
//           crossing tensor included); the leftover group at the end. Then
//           g_j <- (sum_r g_j^r) / W and the local optimizer step (weight decay, momentum).
//   half    the same with fp16 payloads: g -> [clip to +-clip_value] -> fp16 (round to
//           nearest even) -> fp16 all-reduce (each addition rounds to fp16) -> fp32.
//   partial (SINGA's backward_and_partial_update) as each g_j appears: the local optimizer
//           step x_j <- x_j - lr d_j(g_j) with the rank's own gradient; then only partition
//           p_t (1..K, t = 1, 2, ...: p_t = ((t - 1) mod K) + 1, in closing order) has its
//           PARAMETER values all-reduced: x_j <- (sum_r x_j^r) / W for j in P_{p_t}.
//           Optimizer state stays local; every parameter is averaged at start() and
//           before each evaluation (before_evaluation), as SINGA's example does.
//   sparse  per partition P: m = g_P (+ e_P with corr); S = the ceil(spars |P|) largest
//           |m| (top_k, true magnitude, ties to the lowest index) or {i : |m_i| >= spars};
//           e_P = m with S zeroed (corr); (index, value) pairs of S all-gathered and
//           scatter-added: g_P <- (sum_r m^r_S) / W; then the optimizer step.
//           The exchange of the threshold mode ("exchange"): "padded" (the default, SINGA's)
//           first all-gathers every rank's count |S_r| (one int32, on its own, and the rank
//           waits for it as SINGA's host does), then every rank sends 2 nnzMax floats,
//           nnzMax = max_r |S_r| (its pairs, padded); "exact" all-gathers each rank's own
//           2 |S_r| floats (sizes differ). Both sum the same pairs: the same results, other
//           times and bits. top_k has k = ceil(spars |P|) on every rank: one all-gather of
//           2k floats either way, as SINGA's top-k path.
//
// Timing: a partition's collective is issued when it closes, on the rank's communication
// stream (Communicator::stream_all_reduce / stream_all_gather): it starts when the
// previous partition's has completed (SINGA has one fused buffer pair and one NCCL
// stream) and overlaps the rest of backward. Staging copies, fp16 casts and sparse
// selection are charged to the rank's compute when the gradient appears. After backward
// the rank waits for the stream (phase sync/sync: the exposed communication).
//
// Differences from SINGA, on purpose: top-k ranks by true |g| (SINGA's comparator
// truncates |g| to an int, so it keeps roughly the first k elements) and nnz is counted
// exactly (SINGA's threshold path over-counts it on CUDA); each partition has its own
// buffer (SINGA's single buffer pair serialises staging with the previous copy-back,
// which the stream reproduces for the communication).
//
// n_bits per step: 32 per fp32 element all-reduced (sync: d; partial: |P_{p_t}|),
// 16 per fp16 element (half: d), 64 per (index, value) pair this rank sends (sparse;
// padded: nnzMax pairs, padding included, plus 32 for the count).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "kernels/cpu/select.hpp"

namespace dtsim::algorithms {

// SINGA's grouping (kernels::fusion_buckets): element counts in backward order ->
// partitions (indices into `sizes`) in the order they close. A tensor of more than
// `threshold` elements is a partition of its own and does not flush the pending group;
// smaller ones (exactly `threshold` counts as small) accumulate until the staged count
// exceeds the threshold, the crossing tensor included; the leftover group comes last.
// No group exceeds 2 * threshold elements.
std::vector<std::vector<std::size_t>> distopt_partitions(std::span<const std::int64_t> sizes, std::int64_t threshold);

// DistOpt's own scenario fields (AlgorithmSpec::settings) besides its variant.
struct DistOptSettings {
  std::int64_t threshold = 2097152;    // elements: larger tensors are reduced alone, smaller ones fused
  std::int64_t buffer_size = 4194304;  // elements of the fused buffer; needs threshold <= buffer_size / 2
  bool clipping = false;               // half: clip every gradient element to [-clip_value, clip_value]
  double clip_value = 100.0;
  double spars = 0.05;                 // sparse: fraction kept (top_k) or magnitude threshold
  bool top_k = false;                  // sparse: top-k by magnitude instead of |g| >= spars
  bool corr = true;                    // sparse: error-feedback residual per partition
  bool padded_exchange = true;         // sparse threshold mode: SINGA's count all-gather and padded blocks
};

class DistOpt final : public Algorithm {
 public:
  enum class Variant { sync, half, partial, sparse };

  // Throws std::invalid_argument naming the field for an unknown variant or a threshold
  // above buffer_size / 2 (a fused group could overflow SINGA's buffer).
  explicit DistOpt(const AlgorithmSpec& spec);
  DistOpt(const AlgorithmSpec& spec, const DistOptSettings& settings);

  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  sim::Task<void> start(comm::Communicator& comm, std::vector<at::Tensor>& params) override;
  sim::Task<void> before_evaluation(comm::Communicator& comm, std::vector<at::Tensor>& params) override;
  bool drives_backward() const override { return true; }
  std::uint64_t state_bytes() const override;

  // A partition: parameter indices in backward order, and its buffers.
  struct Partition {
    std::vector<std::size_t> params;
    std::int64_t elements = 0;
    bool in_place = false;   // one contiguous fp32 tensor reduced where it lies (sync, partial)
    at::Tensor buffer;       // fp32 fused values (fp16 for half)
    at::Tensor residual;     // sparse with corr: e_P
    at::Tensor packed;       // sparse: this rank's [indices (int32 bits) | values]
    std::vector<at::Tensor> gathered;  // sparse: every rank's packed pairs
    std::int64_t nnz = 0;    // sparse: pairs this rank selected in the last step
    std::vector<std::int64_t> counts;  // sparse: every rank's pairs in the last step
  };
  const std::vector<Partition>& partitions() const { return partitions_; }
  // partial: the partition (1..K) averaged in the last step; 0 before the first.
  std::int64_t last_partial() const { return partial_; }

 private:
  void init(const StepContext& ctx);
  sim::Task<void> average_all(comm::Communicator& comm, std::vector<at::Tensor>& params);
  // Copies `value` (a gradient, or a parameter for partial) into slot `slot` of the
  // partition's buffer (fp16 for half, clipped first with clipping).
  void stage(Partition& part, std::size_t slot, const at::Tensor& value);
  void sparsify(Partition& part);
  // [indices | values] of the first `nnz` selected pairs, each half padded with zeros to
  // `slots` entries.
  void pack(Partition& part, std::int64_t slots);

  Variant variant_;
  std::int64_t threshold_;
  bool clipping_;
  double clip_value_;
  double spars_;
  bool top_k_;
  bool corr_;
  bool padded_;  // sparse threshold mode: SINGA's padded exchange
  LocalOptimizer optimizer_;                 // sync, half, sparse: one step over every tensor
  std::vector<LocalOptimizer> per_param_;    // partial: one per tensor, stepped as it appears
  std::vector<Partition> partitions_;
  std::vector<std::size_t> partition_of_;    // per parameter
  std::vector<std::size_t> slot_of_;         // per parameter: its place in its partition
  std::vector<std::int64_t> offset_of_;      // per parameter: element offset in its buffer
  std::int64_t partial_ = 0;
  kernels::cpu::SelectWorkspace select_;
  std::vector<std::uint32_t> idx_;
  std::vector<float> val_;
};

}  // namespace dtsim::algorithms
