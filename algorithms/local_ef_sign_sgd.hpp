// Local SGD with error-feedback scaled-sign synchronisation (Lin, Stich, Patel, Jaggi,
// ICLR 2020; error feedback as in Karimireddy, Rebjock, Stich, Jaggi, ICML 2019): the
// LocalSGD-Code repository's local_ef_sign_sgd.py::Local_EFSignSGD. Rank i, step t >= 1:
//
//   x_i -= lr * d_i                                  every step (sync/local_update)
//   sync step (the local_sgd schedule), per tensor l:
//     e_i      <- (x_bar - x_i) + e_i                 (sync/get_params,
//     s_i,l     = ||e_i,l||_1 / numel_l ;  sigma_i = sign(e_i)     sync/memory_and_compress)
//     e_i      <- e_i - s_i,l sigma_i,l
//     sigma_bar = (1/n) sum_r sigma_r                 (sync/directions | sync/directions_1bit)
//     s_bar_l   = (1/n) sum_r s_r,l                   (sync/magnitudes)
//     x_bar_l  -= s_bar_l sigma_bar_l ; x_i = x_bar   (sync/update_consensus)
//
// The directions travel either as the reference does, an fp32 all-reduce of the signs
// (sign(0) = 0; phase "sync/directions"; n_bits = 32 d + 32 L), or with packed_signs as
// real 1-bit payloads: an all-gather of packed signs, each decoded to +-1 and averaged
// (sign(0) = +1, on the wire and in the memory update; phase "sync/directions_1bit";
// n_bits = 32 ceil(d / 32) + 32 L). The scales are an fp32 all-reduce either way.
// 0 bits on a local step.
#pragma once

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/local_sgd.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// Local EF-sign SGD's own scenario fields (AlgorithmSpec::settings).
struct LocalEfSignSgdSettings {
  LocalSchedule schedule;
  bool packed_signs = false;  // 1-bit packed exchange instead of the fp32 all-reduce
};

class LocalEfSignSgd final : public Algorithm {
 public:
  explicit LocalEfSignSgd(const AlgorithmSpec& spec);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

  // After the last sync step, flat over all tensors: x_bar; e; this rank's input
  // x_bar - x_i; its signs sigma_i (as used in its memory update) and scales s_i.
  const at::Tensor& consensus() const { return consensus_.buffer(); }
  const at::Tensor& memory() const { return memory_; }
  // The consensus model x-bar and the error memory e.
  std::uint64_t state_bytes() const override;
  const at::Tensor& input() const { return input_; }
  const at::Tensor& own_signs() const { return own_signs_; }
  const at::Tensor& own_scales() const { return own_scales_; }

 private:
  LocalOptimizer optimizer_;
  LocalSchedule schedule_;
  bool packed_;
  kernels::Compressor compressor_;  // sign, for packed_signs
  kernels::TensorBuffer consensus_, flat_params_;
  std::vector<std::int64_t> offsets_, segments_;
  at::Tensor memory_, input_, own_signs_, own_scales_, signs_, scales_;
  kernels::Payload payload_, received_;
  std::vector<at::Tensor> gathered_;
};

}  // namespace dtsim::algorithms
