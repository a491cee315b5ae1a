// Parallel SGD, the reference code's sgd.py::SGD, in its two forms:
//
// Centralized (all-reduce of gradients):
//   g_bar = (1/n) sum_i g_i              (sync/get_data, sync/sync, sync/unflatten_grad)
//   apply_gradient(g_bar): x -= lr * d   (sync/apply_grad; weight decay and momentum
//                                         after averaging)
// Decentralized (D-PSGD, Lian et al. 2017, adapt-then-combine):
//   x_i -= lr * d_i                      (sync/apply_grad)
//   x_i <- sum_j w_ij x_j                (sync/get_data, sync/sync, sync/update_model;
//                                         full fp32 models exchanged with neighbours)
// n_bits = 32 d per step in both (the whole fp32 buffer, counted once).
//
// D-PSGD with a compressor C (optional, "compressor" in a scenario; the default identity
// is the uncompressed algorithm above, bit for bit): naive compressed gossip,
//   x_i <- w_ii x_i + sum_j w_ij decompress(C(x_j))
// each rank sends C(x_i), the compressor's packed payload (gossip.hpp: per-rank
// compressor seeds, threshold rejected), and mixes its own model uncompressed. n_bits
// follows gossip.hpp's convention (top_k: 64 K, ...). Unlike CHOCO-SGD this does not
// converge to the exact average for biased C; it is the baseline the papers compare with.
// The centralized variant takes no compressor.
#pragma once

#include <optional>

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

class CentralizedSgd final : public Algorithm {
 public:
  explicit CentralizedSgd(OptimizerSpec spec) : optimizer_(spec) {}
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

 private:
  LocalOptimizer optimizer_;
  kernels::TensorBuffer flat_grads_;
};

class DecentralizedSgd final : public Algorithm {
 public:
  DecentralizedSgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

 private:
  LocalOptimizer optimizer_;
  std::vector<int> peers_;
  std::vector<double> weights_;  // w_ii first, then w_ij in peers_ order
  kernels::TensorBuffer flat_params_;
  std::vector<at::Tensor> received_;
  at::Tensor mixed_;
  // Set when the spec's compressor is not identity (then the payload is exchanged).
  std::optional<kernels::Compressor> compressor_;
  GossipMessage message_;
  std::vector<std::int64_t> segments_;
};

}  // namespace dtsim::algorithms
