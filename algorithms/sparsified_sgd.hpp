// Sparsified SGD with memory, in the style of Deep Gradient Compression (Lin, Han, Mao,
// Wang, Dally, ICLR 2018; memory analysed by Stich, Cordonnier, Jaggi, "Sparsified SGD
// with Memory", NeurIPS 2018): the reference code's dgc.py::DGC. Rank i, per tensor:
//
//   d_i  = apply_gradient(g_i)              weight decay, local momentum   (grad/apply_grad)
//   g'_i = d_i + m_i                                                        (grad/recover_hat_params
//   (v_i, idx_i) = C(g'_i)                  top-k, random-k or threshold     and grad/compress)
//   m_i  = g'_i - scatter(v_i, idx_i)       g'_i with the sent coordinates zeroed
//          [mask_momentum: momentum buffer zeroed at idx_i too]
//   (v_r, idx_r) from every rank r          all-gather, sizes may differ    (grad/sync)
//   x   -= lr * (1/n) sum_r scatter(v_r, idx_r)                             (grad/recover_info,
//                                                                             grad/update_model)
// With any other compressor but identity (a quantizer: one_bit as 1-bit SGD, terngrad,
// natural, sign, the casts) C sends every coordinate, quantized, and m_i keeps its error:
//   m_i = g'_i - decode(C(g'_i)),  x -= lr * (1/n) sum_r decode(C_r)
// With C = qsgd (the reference's quantize_qsgd, a branch it takes by name) there is no memory:
//   x -= lr * (1/n) all_reduce_sum(Q(d_i))  (the decoded fp32 values, as the reference sends)
//
// n_bits (the reference's): 96 k for the sparse kinds (k values plus k indices counted as
// int64; k = sum over tensors of max(1, floor(ratio * numel)), or the threshold count);
// a quantizer's payload bits; b d for QSGD with b = log2(levels + 1), the reference's
// quantize_level.
// random_k draws with seed + rank (independent ranks) unless shared_seed is set.
//
// As the reference's DGC also does, optionally:
// - clipping (clip_grad_norm c > 0): in apply_gradient, after weight decay and before
//   momentum, each tensor's d is scaled to L2 norm c / sqrt(n) when its norm is at least that
//   (the reference's _clip_gradient with scale=True);
// - compression-ratio warm-up (compress_warmup_epochs E > 0, top_k and random_k): of the
//   warm-up ratios (fractions kept; the reference's compress_warmup_values are the fractions
//   dropped, 0.75 ... 0.999, i.e. kept 0.25 ... 0.001) those r_1 > ... > r_m at least the
//   compressor's ratio r are used: a step at epoch e < E (StepContext::epoch) keeps r_i for
//   the first i with e < i E / m; from epoch E on, r (the reference's _get_compress_ratio).
#pragma once

#include <optional>
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// Sparsified SGD's own scenario fields (AlgorithmSpec::settings) besides the compressor.
struct SparsifiedSgdSettings {
  bool mask_momentum = false;           // zero the momentum at the sent coordinates
  double clip_grad_norm = 0.0;          // the reference's clip_grad_val (0: no clipping)
  double compress_warmup_epochs = 0.0;  // the reference's compression-ratio warm-up (0: none)
  // Fractions kept during the warm-up: the reference's default compress_warmup_values
  // 0.75, 0.9375, 0.984375, 0.996, 0.999 (fractions dropped) as fractions kept.
  std::vector<double> compress_warmup_ratios{0.25, 0.0625, 0.015625, 0.004, 0.001};
};

class SparsifiedSgd final : public Algorithm {
 public:
  // Throws std::invalid_argument for a compressor that sends the gradient whole (identity).
  // Rank `rank` of `ranks` (clipping scales its threshold by 1/sqrt(ranks)).
  SparsifiedSgd(const AlgorithmSpec& spec, int rank, int ranks);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

  // m, flat over all tensors (zeros with qsgd), after the last step.
  const at::Tensor& memory() const { return memory_; }
  // The memory m (none with qsgd, which keeps no residual).
  std::uint64_t state_bytes() const override;
  // What this rank sent in the last step.
  const kernels::Payload& sent() const { return payload_; }
  // The compressor of the last step (the warm-up's, during the warm-up).
  kernels::Compressor& compressor() { return active_ ? warmup_[*active_] : compressor_; }
  // The fraction kept at epoch `e` (the compressor's ratio after the warm-up).
  double ratio_at(double epoch) const;
  LocalOptimizer& optimizer() { return optimizer_; }

 private:
  void init(const std::vector<at::Tensor>& grads);
  void zero_momentum_at_sent();
  kernels::Compressor& compressor_at(double epoch);

  LocalOptimizer optimizer_;
  kernels::Compressor compressor_;
  // The warm-up: one compressor per ratio r_i, used while epoch < warmup_ends_[i].
  std::vector<kernels::Compressor> warmup_;
  std::vector<double> warmup_ends_;
  std::optional<std::size_t> active_;  // the warm-up compressor of the last step; none: compressor_
  bool quantized_;
  bool mask_momentum_;
  kernels::TensorBuffer flat_;  // d, then (qsgd) the quantized and reduced values
  std::vector<std::int64_t> segments_;
  at::Tensor memory_, update_;
  kernels::Payload payload_;
  std::vector<at::Tensor> gathered_;
  std::vector<kernels::Payload> received_;
};

}  // namespace dtsim::algorithms
