// ECD-PSGD, extrapolation compression (Tang, Gan, Zhang, Zhang, Liu, "Communication
// Compression for Decentralized Training", NeurIPS 2018, Algorithm 2), as the reference
// ChocoSGD dl_code pcode/optim/ecd_psgd.py. Rank i, step t (t = local_index >= 1):
//
//   d_i = apply_gradient(g_i)                         grad/apply_grad (not applied to x)
//                                                     grad/get_params
//   x+ = sum_{j in N(i) u {i}} w_ij y^_j              grad/get_extrapolated_model
//   x+ -= lr d_i ; x_i <- x+ ;                        grad/unflatten_to_update
//   z = (1 - t/2) x_t + (t/2) x+                      (x_t: the model before this step)
//   q_i = C(z)            (the whole vector, not a difference)   grad/compress
//   send q_i to, receive q_j from, every j in N(i)    grad/sync
//   y^_j <- (1 - 2/t) y^_j + (2/t) q_j for j in N(i) u {i}       grad/unflatten_to_update
//
// State: deg(i) + 1 full replicas y^_j, initialised to this rank's initial model x_0.
// With the identity compressor and equal initial models, y^_j = x_j after every step
// and x_{t+1} = W x_t - lr d_t. The extrapolation weight t/2 grows with t, so the
// compression error in z grows like t and is damped only by 2/t: with aggressive or
// biased compression the iterates stall or diverge.
// sign(0): the sign kernels encode 0 and -0 as +1 on both sides.
// n_bits: one message, gossip.hpp's convention.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

class EcdPsgd final : public Algorithm {
 public:
  EcdPsgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  std::uint64_t state_bytes() const override;

 private:
  LocalOptimizer optimizer_;
  Neighborhood hood_;
  kernels::Compressor compressor_;
  std::vector<std::int64_t> segments_;
  kernels::TensorBuffer flat_params_, flat_grads_;
  std::vector<at::Tensor> replicas_;  // y^_i, then y^_j in peers order
  std::vector<double> weights_;       // w_ii, then w_ij in peers order
  at::Tensor next_, z_;               // x+, z
  GossipMessage message_;
};

}  // namespace dtsim::algorithms
