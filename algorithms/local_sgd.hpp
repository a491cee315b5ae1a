// Local SGD and post-local SGD (Stich, "Local SGD Converges Fast and Communicates
// Little", ICLR 2019; Lin, Stich, Patel, Jaggi, "Don't Use Large Mini-Batches, Use Local
// SGD", ICLR 2020): the reference code's local_sgd.py::LocalSGD. Rank i, step t >= 1:
//
//   x_i   -= lr * d_i                         every step; d_i after weight decay and
//                                             local momentum (never synchronised)
//                                             (sync/local_update)
//   sync step (t < turn_on_local_steps_from, or t mod H == 0):   (sync/sync_and_update)
//     Delta  = (1/n) sum_r (x_bar - x_r)       fp32 all-reduce
//     x_bar -= Delta                           (= the mean of the x_r)
//     x_i    = x_bar
//
// x_bar starts at x_0. Post-local SGD = mini-batch SGD (H = 1) for the first
// turn_on_local_steps_from - 1 steps, local SGD with H afterwards.
// n_bits = 32 d on a sync step, 0 on a local step.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/local_schedule.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// Element offset of each tensor in the flat buffer; back() = total.
inline std::vector<std::int64_t> flat_offsets(const std::vector<at::Tensor>& tensors) {
  std::vector<std::int64_t> offsets{0};
  for (const auto& t : tensors) offsets.push_back(offsets.back() + t.numel());
  return offsets;
}

// The local sign family's consensus update, per tensor l: x_bar_l -= scale_l * sign_l
// (scales and signs already averaged over ranks), then x <- x_bar. The L scales are read
// on the host (a copy when they live on a GPU).
inline void apply_scaled_signs(kernels::TensorBuffer& consensus, const at::Tensor& signs, const at::Tensor& scales,
                               const std::vector<std::int64_t>& offsets, std::vector<at::Tensor>& params) {
  const at::Tensor host_scales = scales.to(at::kCPU);
  const float* s = host_scales.data_ptr<float>();
  for (std::size_t l = 0; l + 1 < offsets.size(); ++l) {
    const auto len = offsets[l + 1] - offsets[l];
    consensus.buffer().narrow(0, offsets[l], len).sub_(signs.narrow(0, offsets[l], len) * s[l]);
  }
  consensus.unpack(params);
}

class LocalSgd final : public Algorithm {
 public:
  explicit LocalSgd(const AlgorithmSpec& spec) : optimizer_(spec.optimizer), schedule_(settings_of<LocalSchedule>(spec)) {}
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

  // x_bar, flat over all tensors.
  const at::Tensor& consensus() const { return consensus_.buffer(); }
  // The consensus model x-bar of the last synchronisation.
  std::uint64_t state_bytes() const override;

 private:
  LocalOptimizer optimizer_;
  LocalSchedule schedule_;
  kernels::TensorBuffer consensus_, flat_params_;
  at::Tensor diff_;
};

}  // namespace dtsim::algorithms
