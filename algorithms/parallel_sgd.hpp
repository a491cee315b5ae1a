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
// The centralized variant takes no compressor; it can instead compress its all-reduce with
// PowerSGD (Vogels et al., NeurIPS 2019; gradient_compression "powersgd", the fields and
// semantics of PyTorch's PowerSGDState, powersgd.hpp): from step start_powerSGD_iter on,
//   g_bar ~ PowerSGD(g_i [+ e_i])        (sync/compress, sync/sync: all-reduce of the
//                                         uncompressed tensors and P, then of Q)
// over the whole model in parameter order, the ddp powersgd hook without buckets or
// overlap; n_bits 32 (n + m) r per compressed matrix plus 32 per uncompressed element.
#pragma once

#include <memory>
#include <optional>

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/local_update.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/powersgd.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// parallel_sgd's own settings (AlgorithmSpec::settings) besides its variant and compressor.
struct ParallelSgdSettings {
  // The optimizer object (/algorithm/optimizer) each rank applies instead of the
  // reference's SGD, if given.
  std::optional<optimizers::OptimizerConfig> optimizer;
  std::string gradient_compression = "none";  // centralized: "none" (the plain all-reduce) or "powersgd"
  PowerSgdOptions powersgd;                   // gradient_compression "powersgd"'s
};

class CentralizedSgd final : public Algorithm {
 public:
  explicit CentralizedSgd(const AlgorithmSpec& spec);
  CentralizedSgd(const AlgorithmSpec& spec, const ParallelSgdSettings& settings);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  std::uint64_t state_bytes() const override { return powersgd_.state_bytes() + update_.state_bytes(); }
  // PowerSGD's P and Q (n x r, m x r per compressed tensor, in parameter order).
  std::vector<at::Tensor> ps() const { return powersgd_.ps(); }
  std::vector<at::Tensor> qs() const { return powersgd_.qs(); }
  // The tensors PowerSGD compresses, in parameter order: ps()[i], qs()[i] are the i-th's.
  std::vector<std::size_t> compressed_tensors() const { return powersgd_.compressed_order(); }

 private:
  sim::Task<std::uint64_t> powersgd_all_reduce(StepContext& ctx);

  LocalUpdate update_;
  kernels::TensorBuffer flat_grads_;
  // gradient_compression "powersgd":
  bool use_powersgd_;
  PowerSgdSettings settings_;
  std::int64_t start_iter_;
  NumpyRandomState random_;  // PowerSGD's draws, as the hook's np.random.RandomState(random_seed)
  PowerSgdGroup powersgd_;
  std::int64_t iter_ = 0;
};

class DecentralizedSgd final : public Algorithm {
 public:
  DecentralizedSgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank);
  ~DecentralizedSgd() override;
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  std::uint64_t state_bytes() const override { return update_.state_bytes(); }

 private:
  LocalUpdate update_;
  std::vector<int> peers_;
  std::vector<double> weights_;  // w_ii first, then w_ij in peers_ order
  kernels::TensorBuffer flat_params_;
  std::vector<at::Tensor> received_;
  at::Tensor mixed_;
  // Set when the spec's compressor is not identity (then the payload is exchanged).
  std::unique_ptr<kernels::Compressor> compressor_;
  GossipMessage message_;
  std::vector<std::int64_t> segments_;
};

}  // namespace dtsim::algorithms
