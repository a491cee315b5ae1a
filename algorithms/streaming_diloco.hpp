// Streaming DiLoCo (Douillard et al., "Streaming DiLoCo with overlapping communication:
// Towards a Distributed Free Lunch", arXiv 2501.18512, 2025): DiLoCo
// (diloco.hpp) synchronising one fragment of the model at a time, overlapped with training.
// Rank r, inner step t (from 1), fragments p = 0..P-1:
//
//   theta_r <- InnerOpt(theta_r, g_r)                      inner/update (AdamW by default)
//   t = t_p + tau (fragment p's exchange started at t_p):  outer/join
//     Delta_p = (1/R) sum_r Delta_p,r  (decoded, fp32)
//     theta_p <- OuterOpt_p(theta_p, Delta_p)              the global fragment (Nesterov SGD)
//     theta_p,r <- alpha theta_p,r + (1 - alpha) theta_p   merge into the local fragment
//   t mod H = floor(p H / P):                              outer/start, fragment p
//     Delta_p,r = theta_p - theta_p,r; encode (FP4 E3M0 by default), start the all-gather
//
// (1) Fragments in the strided pattern: fragment p holds transformer blocks p, p + P, p + 2P,
// ... A tensor's block is the integer after a name component "h", "layers", "blocks" or
// "layer" (nanoGPT's transformer.h.3.attn.c_attn.weight is block 3); a tensor outside the
// blocks joins the fragment of the nearest block before it in parameter order, or after it
// for the tensors before the first block (the gpt workload's embeddings go with block 0, the
// final LayerNorm with block L - 1). A workload without such names (a CNN, logistic
// regression) falls back to strided tensors: fragment p holds tensors p, p + P, ... in
// parameter order. P > blocks (or tensors) is an error at /algorithm/fragments.
// (2) Staggered: fragment p syncs every H steps at offset floor(p H / P) (P <= H, so the
// offsets differ and at most one fragment starts per step); its first exchange covers
// fewer than H inner steps when the offset is not 0.
// (3) Overlap: the exchange runs while the rank trains tau more inner steps (tau <=
// floor(H / P), so one fragment is in flight at a time); tau = 0 joins in the same step.
// alpha = 0 with tau = 0 is DiLoCo on each fragment.
//
// n_bits: the fragment's message in the step that starts its exchange (outer_exchange.hpp's
// closed forms), 0 on other steps; the result's peak rate (`peak_n_bits_per_s`) shows the
// peak bandwidth dropping with P. state_bytes(): theta, the outer optimizers' and the inner
// optimizer's state. The last exchange still in flight after the last step is joined by
// finish().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/diloco.hpp"
#include "algorithms/outer_exchange.hpp"

namespace dtsim::algorithms {

struct StreamingDilocoSettings {
  DilocoSettings diloco{.local_steps = 100, .outer_codec = OuterCodec::fp4};
  std::int64_t fragments = 2;      // P
  std::int64_t overlap_steps = 1;  // tau
  double mixing = 0.5;             // alpha
};

// The fragment whose exchange starts at step t (>= 1), or -1.
std::int64_t streaming_fragment_at(std::int64_t t, std::int64_t local_steps, std::int64_t fragments);
// The tensors of every fragment (indices in parameter order), from the parameter names (see
// above); std::invalid_argument when there are fewer blocks (or tensors) than fragments.
std::vector<std::vector<std::size_t>> streaming_fragments(const std::vector<std::string>& names, std::size_t tensors,
                                                          std::int64_t fragments);

class StreamingDiloco final : public Algorithm {
 public:
  explicit StreamingDiloco(const AlgorithmSpec& spec);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  sim::Task<void> finish(comm::Communicator& comm) override;
  std::uint64_t state_bytes() const override;

  const std::vector<std::vector<std::size_t>>& fragments() const { return fragments_; }
  const std::vector<at::Tensor>& global() const { return theta_; }

 private:
  void first_step(const std::vector<at::Tensor>& params);
  sim::Task<void> join(comm::Communicator& comm);

  StreamingDilocoSettings s_;
  std::vector<std::string> names_;
  const std::vector<bool> weight_decay_mask_;
  std::unique_ptr<optimizers::Optimizer> inner_;
  std::vector<std::vector<std::size_t>> fragments_;
  std::vector<std::unique_ptr<optimizers::Optimizer>> outer_;  // per fragment
  std::vector<OuterExchange> exchange_;                         // per fragment
  std::vector<at::Tensor> theta_;                               // global model, every tensor
  std::vector<std::vector<at::Tensor>> theta_p_, delta_p_;       // per fragment: views of theta_, Delta_p
  std::vector<at::Tensor>* params_ = nullptr;                    // the rank's parameters (for finish)
  std::int64_t pending_ = -1;                                    // the fragment in flight
  std::int64_t join_at_ = 0;
};

}  // namespace dtsim::algorithms
