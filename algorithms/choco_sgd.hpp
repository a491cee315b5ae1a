// CHOCO-SGD (Koloskova, Stich, Jaggi, "Decentralized Stochastic Optimization and Gossip
// Algorithms with Compressed Communication", ICML 2019, Algorithm 2; Koloskova, Lin,
// Stich, Jaggi, ICLR 2020), as the reference ParallelCHOCO (ChocoSGD dl_code
// pcode/optim/parallel_choco.py). Rank i, step t:
//
//   x_i <- x_i - lr d_i                               grad/apply_grad
//   x_i <- x_i + gamma (s_i - x^_i)                   grad/update_params_from_neighbor
//   q_i  = C(x_i - x^_i)                              grad/compress
//   send q_i to, receive q_j from, every j in N(i)    grad/sync
//   x^_i += q_i ;  s_i += sum_{j in N(i) u {i}} w_ij q_j   grad/decompress
//
// State: two buffers, x^_i and s_i = sum_j w_ij x^_j, both starting at zero (so the first
// step does no mixing: x_2 = x_1 - lr d_1). gamma = consensus_stepsize.
// With the identity compressor and gamma = 1: x^_j = x_j after every step and
// x_{t+1} = W x_t - lr d_t for t >= 2 (x_2 = x_1 - lr d_1), i.e. DCD-PSGD's recursion,
// and the same as x_{t+1} = W x_t - lr d_t from t = 1 when all ranks start equal.
//
// overlap (default, as ParallelCHOCO's background process): round t's exchange is
// started at the end of step t and joined at step t+1, after apply_grad and before the
// consensus update (grad/sync, then grad/decompress), so it overlaps the next forward and
// backward passes. The arithmetic is the same as without overlap; only the timing differs.
// The last round's exchange is still in flight after the last step: the caller must
// co_await finish() before destroying the algorithm (the runner does).
//
// n_bits: step t returns the bits of the message it sends (round t), gossip.hpp's
// convention. (The reference's overlapped step returns the previous round's count: 0 at
// t = 1, then the same constant, since every supported compressor's size is fixed.)
// sign(0): the sign kernels encode 0 and -0 as +1 on both sides, so q_i is never 0 under
// (scaled) sign; the reference's torch.sign sends 0 but its receivers decode +1.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// CHOCO-SGD's own scenario fields (AlgorithmSpec::settings).
struct ChocoSgdSettings {
  double consensus_stepsize = 1.0;  // gamma, in (0, 1]
  bool overlap = true;              // round t's exchange overlaps round t+1's compute
};

class ChocoSgd final : public Algorithm {
 public:
  ChocoSgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  sim::Task<void> finish(comm::Communicator& comm) override;
  std::uint64_t state_bytes() const override;

 private:
  sim::Task<void> join_and_decode(StepContext& ctx);

  LocalOptimizer optimizer_;
  double gamma_;
  bool overlap_;
  Neighborhood hood_;
  kernels::Compressor compressor_;
  std::vector<std::int64_t> segments_;
  kernels::TensorBuffer flat_params_;
  at::Tensor x_hat_, s_, diff_;  // x^_i, s_i, scratch for x_i - x^_i
  GossipMessage message_;
  comm::Op in_flight_;
  bool pending_ = false;  // a sent round whose neighbours' messages are not yet in s_i
};

}  // namespace dtsim::algorithms
