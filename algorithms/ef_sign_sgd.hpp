// EF-signSGD: scaled sign compression with error feedback (Karimireddy, Rebjock, Stich,
// Jaggi, "Error Feedback Fixes SignSGD and other Gradient Compression Schemes", ICML
// 2019): the reference code's ef_sign_sgd.py::EF_SignSGD. Rank i, per tensor l:
//
//   d_i   = apply_gradient(g_i)                    (sync/apply_grad, sync/get_data)
//   p_i   = d_i + e_i                              (sync/use_memory)
//   c_i,l = (||p_i,l||_1 / numel_l) sign(p_i,l)    (sync/compress; sign(0) = +1)
//   all-gather of every rank's norms and packed signs (one scaled_sign payload)  (sync/sync)
//   e_i   = p_i - c_i                              (sync/update_memory)
//   u     = (1/n) sum_r decode(c_r)                (sync/decompress)
//   x    -= lr * u                                 (sync/apply_grad)
//
// The memory is in gradient units and lr is applied afterwards, as in the reference (the
// paper stores lr * g; the two differ only when lr changes).
// n_bits = 32 ceil(d / 32) + 32 L: the payload (L fp32 norms and the sign words).
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

class EfSignSgd final : public Algorithm {
 public:
  explicit EfSignSgd(const AlgorithmSpec& spec);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

  // e, flat over all tensors, after the last step.
  const at::Tensor& memory() const { return memory_; }
  // The error memory e.
  std::uint64_t state_bytes() const override;
  // c: what this rank sent in the last step.
  const kernels::Payload& sent() const { return payload_; }
  kernels::Compressor& compressor() { return compressor_; }

 private:
  LocalOptimizer optimizer_;
  kernels::Compressor compressor_;
  kernels::TensorBuffer flat_;  // d, then p = d + e
  std::vector<std::int64_t> segments_;
  at::Tensor memory_, update_;
  kernels::Payload payload_;
  std::vector<at::Tensor> gathered_;
  kernels::Payload received_;
};

}  // namespace dtsim::algorithms
