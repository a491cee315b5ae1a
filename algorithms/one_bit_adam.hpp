// 1-bit Adam (Tang, Gan, Awan, Rajbhandari, Li, Lian, Liu, Zhang, He, "1-bit Adam:
// Communication Efficient Large-Scale Training with Adam's Convergence Speed", ICML 2021,
// arXiv 2102.02888, Algorithm 1) as DeepSpeed runs it (OnebitAdam,
// deepspeed/runtime/fp16/onebit/adam.py; NcclBackend.compressed_allreduce,
// deepspeed/runtime/comm/nccl.py). Rank r, every step t (from 1) at lr eta, per parameter
// tensor theta (gradient g, moments m and v), T_w = freeze_step:
//
// Warm-up, t <= T_w: torch.optim.Adam (AdamW's decoupled decay when wd > 0) on the average
// of the ranks' gradients, operation by operation as optimizers/adam.cpp:
//   g     <- (1/R) sum_s g_s                             fp32 all-reduce (sync/sync)
//   theta <- theta (1 - eta wd)                          (sync/apply_grad, as all below)
//   m     <- b1 m + (1 - b1) g;   v <- b2 v + (1 - b2) g^2
//   theta <- theta - eta / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Compression stage, t > T_w: v is frozen as step T_w left it.
//   theta <- theta (1 - eta wd)
//   m     <- b1 m + (1 - b1) g_r                         the local gradient, not reduced
//   m     <- CompressedAllReduce(m)                      below
//   theta <- theta - eta / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^T_w) + eps)
//
// CompressedAllReduce, per tensor of n elements zero-padded to N (a multiple of 32 R) and
// cut into R chunks of N / R; C(x) = s sign(x) with sign(0) = +1 (DeepSpeed's
// sign().add_(1).bool()) and the scale s = ||x||_2 / sqrt(numel x) (DeepSpeed's; the paper
// leaves the scale to the compressor):
//   x   <- m + e_w;   e_w <- x - C(x)                    worker error   (sync/compress)
//   phase 1: rank j gets chunk j of every rank's C(x)   point-to-point (sync/phase1), as
//            DeepSpeed's all_to_all_single of the signs and all_gather of the scales
//   y_j <- sum_s (s_s / R) sign(x_s)[chunk j] + e_s;   e_s <- y_j - C(y_j)
//                                                        server error   (sync/server)
//   phase 2: all-gather of every rank's C(y_j)          (sync/phase2)
//   m   <- [C(y_0), ..., C(y_{R-1})], cropped to n       (sync/decompress)
//
// Bias correction: DeepSpeed applies none in either stage (its update is m / (sqrt(v) +
// eps); its bias_correction argument is stored and unused). Here the warm-up is
// torch.optim.Adam's, corrections included, and the compression stage keeps them, the
// variance's frozen at T_w: dropping them at the switch would multiply the step by about
// 1 / sqrt(1 - b2^T_w) (3.2 at T_w = 100), and m's (1 - b1^t) tends to 1 anyway. DeepSpeed
// adds wd theta to the update (theta - eta (u + wd theta)): AdamW's decay, rounded
// differently. Also unlike DeepSpeed: its first step only builds state (no update); it pads
// to a multiple of R lcm(R, 8) (bytes of packbits), this to 32 R (whole 32-bit words of the
// sign kernel per chunk; the padded zeros enter the scales and errors as in DeepSpeed); its
// exp_avg_mask is not offered. With R = 1 nothing is compressed (DeepSpeed: size > 1).
// Phase 1 sends to every rank, not only to gossip neighbours, so the timing-only mode
// (comm/representative.hpp, which mirrors messages to neighbours only) cannot replay the
// compressed steps: its entry says so (replays_from_one_rank), and timing-only mode refuses
// it with a one-line error before running anything.
//
// Messages: the sign kernel's words (kernels/compressor.hpp `sign`: bit set iff x < 0).
// Phase 1, to each other rank j: the T worker scales (fp32), then tensor by tensor the
// words of its chunk j. Phase 2, every rank's block: its T server scales, then tensor by
// tensor the words of its server chunk. n_bits (every message this rank originates, a
// point-to-point one once per destination, its all-gather block once) = (R - 1) (sum_i
// N_i / R + 32 T) + (sum_i N_i / R + 32 T) = sum_i N_i + 32 R T per compressed step; 32 d
// per warm-up step (the fp32 all-reduce, as parallel SGD counts it).
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "kernels/compressor.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// 1-bit Adam's fields (AlgorithmSpec::settings), named and defaulted as DeepSpeed's OnebitAdam.
struct OneBitAdamSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  std::int64_t freeze_step = 100000;  // T_w >= 1: warm-up steps before v freezes
};

class OneBitAdam final : public Algorithm {
 public:
  explicit OneBitAdam(const AlgorithmSpec& spec);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

  // Tensor i's m (after a compressed step: the all-reduced average) and v.
  const at::Tensor& momentum(std::size_t i) const { return m_.at(i); }
  const at::Tensor& variance(std::size_t i) const { return v_.at(i); }
  // Tensor i's worker error e_w (N_i elements) and server error e_s (N_i / R); undefined
  // before the first compressed step.
  at::Tensor worker_error(std::size_t i) const;
  at::Tensor server_error(std::size_t i) const;
  // N_i, tensor i's padded size.
  std::int64_t padded_size(std::size_t i) const { return padded_.at(i); }
  // m, v and the two error memories.
  std::uint64_t state_bytes() const override;

 private:
  void prepare(const std::vector<at::Tensor>& params, int ranks);
  void adam_update(std::size_t i, at::Tensor& p, const at::Tensor& g, double lr, std::int64_t t, bool decays);
  void apply_frozen(std::size_t i, at::Tensor& p, double lr, std::int64_t t);
  sim::Task<std::uint64_t> compressed_step(StepContext& ctx);

  OneBitAdamSettings settings_;
  double weight_decay_;
  std::vector<bool> weight_decay_mask_;
  int ranks_ = 1;
  kernels::Compressor signs_;
  std::vector<at::Tensor> m_, v_;
  kernels::TensorBuffer flat_grads_;  // warm-up
  // Per tensor: N_i and its offsets in the flat padded buffers (worker: sum N_i; server:
  // sum N_i / R, both multiples of 32 per tensor).
  std::vector<std::int64_t> padded_, worker_offset_, server_offset_;
  std::int64_t worker_elements_ = 0, server_elements_ = 0;
  at::Tensor x_, worker_error_, server_error_, y_, decoded_;
  at::Tensor worker_scales_, server_scales_;  // fp32 [T]
  kernels::Payload worker_payload_, server_payload_;
  std::vector<at::Tensor> outgoing_, incoming_, gathered_;
};

}  // namespace dtsim::algorithms
