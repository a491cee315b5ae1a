// Local signSGD: local steps along sign(d), periodic averaging of scaled signs of the
// model difference (Lin, Stich, Patel, Jaggi, ICLR 2020, the LocalSGD-Code repository's
// local_sign_sgd.py::Local_SignSGD). Rank i, step t >= 1:
//
//   x_i -= lr * sign(d_i)                       every step (torch sign: sign(0) = 0)
//                                               (sync/local_update)
//   sync step (the local_sgd schedule), per tensor l:
//     s_i,l     = ||x_bar_l - x_i,l||_1 / numel_l ;  sigma_i = sign(x_bar - x_i)
//                                               (sync/get_params)
//     s_bar_l   = (1/n) sum_r s_r,l ; sigma_bar = (1/n) sum_r sigma_r
//                                               two fp32 all-reduces (sync/sync_and_decompress)
//     x_bar_l  -= s_bar_l * sigma_bar_l ; x_i = x_bar   (sync/update_consensus)
//
// No memory; note mean(s) mean(sigma) != mean(s sigma), as in the reference.
// n_bits = 32 d + 32 L on a sync step (the fp32 signs and the L scales), 0 otherwise.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/local_sgd.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

class LocalSignSgd final : public Algorithm {
 public:
  explicit LocalSignSgd(const AlgorithmSpec& spec) : optimizer_(spec.optimizer), schedule_(settings_of<LocalSchedule>(spec)) {}
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

  const at::Tensor& consensus() const { return consensus_.buffer(); }
  // The consensus model x-bar of the last synchronisation.
  std::uint64_t state_bytes() const override;

 private:
  LocalOptimizer optimizer_;
  LocalSchedule schedule_;
  kernels::TensorBuffer consensus_, flat_params_;
  at::Tensor signs_, scales_;
  std::vector<std::int64_t> offsets_;
};

}  // namespace dtsim::algorithms
