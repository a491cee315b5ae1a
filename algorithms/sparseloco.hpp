// SparseLoCo ("Communication Efficient LLM Pre-training with SparseLoCo", arXiv 2508.15706,
// 2025): DiLoCo whose outer gradient is sparsified, quantised to
// 2 bits and error-compensated, with no outer momentum. Rank r, outer step k (every H-th
// inner step):
//
//   H times:  theta_r <- AdamW(theta_r, g_r)            inner/update (the step's lr)
//   Delta_r = theta - theta_r                           outer/pseudo_gradient
//   e_r <- beta e_r + Delta_r                           error feedback (e_r = 0 at the start)
//   Delta_hat_r = Q2(TopK_chunk(e_r))                   outer/compress
//   e_r <- e_r - Delta_hat_r
//   all-gather the Delta_hat_r                          outer/exchange
//   theta <- theta - alpha (1/R) sum_r Delta_hat_r      outer/update; theta_r <- theta
//
// TopK_chunk (kernels/llm_codecs.hpp sparse_encode): every parameter tensor cut into chunks
// (a matrix into chunk x chunk tiles, a vector into runs of chunk^2 elements, at most 4096),
// the k largest
// magnitudes of each kept, k = max(1, round(density E)) for a chunk of E elements (the
// paper's 64 of 4096 is density 1/64). Q2 (two_bit_encode): per chunk the scale M = max |v|
// and the levels {-M, -M/3, M/3, M}. Delta_hat_r is the decode of exactly what rank r
// sends, so e_r keeps everything the message dropped: e_r(after) = beta e_r(before) +
// Delta_r - Delta_hat_r, element for element.
//
// Message per tensor: [scales, fp32 per chunk][indices, ceil(log2 E) bits each packed in
// 32-bit words][codes, 2 bits per kept value]. n_bits on an outer step: sum over tensors of
// chunks k (2 + ceil(log2 E)) + 32 chunks (the payload's information bits; the index words'
// padding to 32 bits, under 32 per tensor, travels but is not counted). 0 on inner steps.
// state_bytes(): theta, e_r and the inner optimizer's state.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/optimizers/optimizer.hpp"
#include "kernels/llm_codecs.hpp"

namespace dtsim::algorithms {

struct SparseLocoSettings {
  std::int64_t local_steps = 50;  // H
  optimizers::OptimizerConfig inner_optimizer{.name = "adamw", .weight_decay = 0.01};
  double outer_lr = 1.0;      // alpha
  double error_decay = 0.95;  // beta
  std::int64_t chunk = 64;    // tile side (matrices; vectors: runs of chunk^2 elements)
  double density = 1.0 / 64.0;
};

// A tensor's chunks, and k for them.
kernels::llm::ChunkLayout sparseloco_layout(const SparseLocoSettings& s, at::IntArrayRef shape);
std::int64_t sparseloco_k(const SparseLocoSettings& s, const kernels::llm::ChunkLayout& layout);
// The exact n_bits of one rank's message for tensors of these shapes.
std::uint64_t sparseloco_bits(const SparseLocoSettings& s, const std::vector<std::vector<std::int64_t>>& shapes);

class SparseLoco final : public Algorithm {
 public:
  explicit SparseLoco(const AlgorithmSpec& spec);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  std::uint64_t state_bytes() const override;

  const std::vector<at::Tensor>& error() const { return e_; }       // e_r
  const std::vector<at::Tensor>& delta() const { return delta_; }   // the last Delta_r
  const std::vector<at::Tensor>& sent() const { return sent_; }     // the last Delta_hat_r
  const std::vector<at::Tensor>& global() const { return theta_; }  // theta

 private:
  void first_step(const std::vector<at::Tensor>& params);
  // Tensor i's message bytes (fixed by its shape, chunk and k).
  std::int64_t message_bytes(std::size_t i) const;
  at::Tensor encode(std::size_t i);  // e_[i]'s message; sets sent_[i]
  void decode_add(const at::Tensor& message, std::size_t i, at::Tensor& out, bool accumulate) const;

  SparseLocoSettings s_;
  std::unique_ptr<optimizers::Optimizer> inner_;
  std::vector<kernels::llm::ChunkLayout> layouts_;
  std::vector<std::int64_t> k_;
  std::vector<at::Tensor> theta_, e_, delta_, sent_, mean_;
  at::Tensor message_;
  std::vector<at::Tensor> gathered_;
};

}  // namespace dtsim::algorithms
