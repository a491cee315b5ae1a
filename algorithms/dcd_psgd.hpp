// DCD-PSGD, difference compression (Tang, Gan, Zhang, Zhang, Liu, "Communication
// Compression for Decentralized Training", NeurIPS 2018, Algorithm 1), as the reference
// ChocoSGD dl_code pcode/optim/dcd_psgd.py. Rank i, step t:
//
//   d_i = apply_gradient(g_i)                         grad/apply_grad (not applied to x)
//                                                     grad/get_grads
//   x_{t+1/2} = sum_{j in N(i) u {i}} w_ij x^_j - lr d_i   grad/apply_local_gradient
//   q_i = C(x_{t+1/2} - x_i)                          grad/compress
//   send q_i to, receive q_j from, every j in N(i)    grad/sync
//   x^_j += q_j for j in N(i) u {i} ;  x_i <- x^_i    grad/unflatten_to_update
//
// State: deg(i) + 1 full model replicas x^_j, all initialised to this rank's initial
// model x_0 (the reference's init_neighbor_hat_params copies its own parameters).
// With the identity compressor: x_{t+1} = W x_t - lr d_t + (I - W) x_1, which is
// x_{t+1} = W x_t - lr d_t when all ranks start from the same x_1 (the runner's case).
// The paper's analysis needs an unbiased compressor with small variance; with biased or
// aggressive compression the replicas' errors accumulate and the iterates diverge.
// sign(0): the sign kernels encode 0 and -0 as +1 on both sides.
// n_bits: one message, gossip.hpp's convention.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

class DcdPsgd final : public Algorithm {
 public:
  DcdPsgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  std::uint64_t state_bytes() const override;

 private:
  LocalOptimizer optimizer_;
  Neighborhood hood_;
  kernels::Compressor compressor_;
  std::vector<std::int64_t> segments_;
  kernels::TensorBuffer flat_params_, flat_grads_;
  std::vector<at::Tensor> replicas_;  // x^_i, then x^_j in peers order
  std::vector<double> weights_;       // w_ii, then w_ij in peers order
  at::Tensor half_;
  GossipMessage message_;
};

}  // namespace dtsim::algorithms
