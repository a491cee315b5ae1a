// signSGD / signum with majority vote (Bernstein, Wang, Azizzadenesheli, Anandkumar,
// "signSGD: Compressed Optimisation for Non-Convex Problems", ICML 2018; Bernstein, Zhao,
// Azizzadenesheli, Anandkumar, "signSGD with Majority Vote is Communication Efficient and
// Fault Tolerant", ICLR 2019): the reference code's sign_sgd.py::SignSGD. Rank i:
//
//   d_i = apply_gradient(g_i)               weight decay, local momentum (signum)
//                                            (sync/get_data, sync/apply_grad)
//   q_i = sign(d_i), 1 bit per element       (sync/compress; sign(0) = +1 on the wire)
//   S   = sum_r decode(q_r)                  all-gather of the packed signs
//                                            (sync/sync_and_decompress)
//   u   = sign(S) (majority_vote; a tie gives 0)  or  S / n
//   x  -= lr * u                             (sync/apply_grad)
//
// n_bits = 32 ceil(d / 32), the reference's (the packed sign words; no norms are sent).
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// signSGD's own scenario field (AlgorithmSpec::settings).
struct SignSgdSettings {
  bool majority_vote = true;  // the sign of the sum (true) or the mean of signs
};

class SignSgd final : public Algorithm {
 public:
  explicit SignSgd(const AlgorithmSpec& spec);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

  // u of the last step, flat over all tensors.
  const at::Tensor& update() const { return update_; }

 private:
  LocalOptimizer optimizer_;
  kernels::Compressor compressor_;
  bool majority_vote_;
  kernels::TensorBuffer flat_params_, flat_grads_;
  std::vector<std::int64_t> segments_;
  at::Tensor update_;
  kernels::Payload payload_;
  std::vector<at::Tensor> gathered_;
  std::vector<kernels::Payload> received_;
};

}  // namespace dtsim::algorithms
