// DeepSqueeze (Tang, Lian, Qiu, Yuan, Zhang, Liu, "DeepSqueeze: Decentralization Meets
// Error-Compensated Compression", arXiv 1907.07346, 2019), as the reference ChocoSGD
// dl_code pcode/optim/deep_squeeze.py. Rank i, step t:
//
//   x_i <- x_i - lr d_i                               grad/apply_grad
//                                                     grad/get_params
//   e_i <- e_i + x_i                                  grad/error_compensate
//   c_i  = C(e_i)                                     grad/compress
//   e_i <- e_i - c_i                                  grad/update_memory
//   send c_i to, receive c_j from, every j in N(i)    grad/sync
//   x_i <- x_i + gamma sum_{j in N(i) u {i}} (w_ij - delta_ij) c_j   grad/decompress
//
// State: the error memory e_i (one buffer), starting at zero. gamma = consensus_stepsize.
// With the identity compressor e stays 0 and x <- ((1 - gamma) I + gamma W)(x - lr d):
// D-PSGD (adapt-then-combine) for gamma = 1. With a doubly stochastic W the gossip term
// sums to zero over ranks, so the node average moves only by -lr mean(d).
// sign(0): the sign kernels encode 0 and -0 as +1 on both sides (the reference's sender
// uses torch.sign's 0 but its receivers decode +1); here sender and receivers agree.
// n_bits: one message, gossip.hpp's convention.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// DeepSqueeze's own scenario fields (AlgorithmSpec::settings).
struct DeepSqueezeSettings {
  double consensus_stepsize = 1.0;  // gamma, in (0, 1]
};

class DeepSqueeze final : public Algorithm {
 public:
  DeepSqueeze(const AlgorithmSpec& spec, const net::Topology& topology, int rank);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  std::uint64_t state_bytes() const override;

 private:
  LocalOptimizer optimizer_;
  double gamma_;
  Neighborhood hood_;
  kernels::Compressor compressor_;
  std::vector<std::int64_t> segments_;
  kernels::TensorBuffer flat_params_;
  at::Tensor memory_;  // e_i
  GossipMessage message_;
};

}  // namespace dtsim::algorithms
