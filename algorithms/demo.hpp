// DeMo, Decoupled Momentum Optimization (Peng, Quesnelle, Kingma, "DeMo: Decoupled Momentum
// Optimization", arXiv 2411.19870, 2024; the authors' DeMo optimizer, demo.py). Rank r, every
// step at lr eta, per parameter tensor theta (its gradient g, its momentum delta):
//
//   theta <- theta (1 - eta wd)                  decoupled weight decay    (sync/apply_grad)
//   delta <- beta delta + eta g                  beta = compression_decay  (sync/apply_grad)
//   q_r   <- TopK_k(DCT(delta)) per chunk        (index, value) pairs      (sync/compress)
//   delta <- delta - IDCT(q_r)                   what is sent leaves the momentum
//   {q_s} <- all-gather of every rank's q        one message of all tensors (sync/sync)
//   Q     <- IDCT((1/R) sum_s q_s)               the ranks' average         (sync/decompress)
//   theta <- theta - eta sign(Q)                 sign(0) = 0, as torch.sign (sync/apply_grad)
//
// The codec is kernels/llm_codecs.hpp's dct_encode / dct_decode: chunks of
// compression_chunk elements per dimension (a vector in chunks of c, a matrix, or a tensor
// of more dimensions as its first dimension times the rest, in c x c tiles; the last chunk
// zero-padded), the orthonormal DCT-II of each chunk, the k = compression_topk largest
// coefficients of each chunk (all E of a chunk of E <= k elements).
//
// Differences from the authors' code, each a choice made here: it cuts a dimension at its
// largest divisor up to the chunk size (no padding), the kernel pads instead; it averages
// each DCT coefficient over the ranks that sent it (scatter_reduce "mean"), this averages
// over all R ranks, the notes' "decode and average" (the same Q when every rank sends
// every coefficient); it all-gathers indices and values per tensor, this sends one
// message holding every tensor's payload.
//
// Message (int32 words, fixed size for given shapes): per tensor in parameter order, its
// chunks k fp32 values, then its ceil(chunks k b / 32) words of b-bit indices (b = max(1,
// ceil(log2 E))). n_bits = sum over tensors of chunks k (32 + b): TopKPayload::bits(), the
// last index word's padding not counted (the wire bytes count whole words).
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "kernels/llm_codecs.hpp"

namespace dtsim::algorithms {

// DeMo's fields (AlgorithmSpec::settings), named as the authors' DeMo optimizer names them.
struct DemoSettings {
  double compression_decay = 0.999;     // beta, in [0, 1)
  std::int64_t compression_topk = 32;   // k per chunk, in [1, compression_chunk^2]
  std::int64_t compression_chunk = 64;  // elements per chunk along each dimension, in [1, 64]
};

class Demo final : public Algorithm {
 public:
  explicit Demo(const AlgorithmSpec& spec);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;

  // delta of tensor i (the residual momentum, after the last step's subtraction).
  const at::Tensor& delta(std::size_t i) const { return deltas_.at(i); }
  // Q of tensor i in the last step (the decoded average of every rank's payload).
  const at::Tensor& average(std::size_t i) const { return averages_.at(i); }
  // The message this rank sent in the last step (int32 words).
  const at::Tensor& message() const { return message_; }
  // The momenta delta.
  std::uint64_t state_bytes() const override;

 private:
  void prepare(const std::vector<at::Tensor>& params);

  DemoSettings settings_;
  double weight_decay_;
  std::vector<bool> weight_decay_mask_;
  std::vector<kernels::llm::ChunkLayout> layouts_;
  std::vector<std::int64_t> k_, value_words_, index_words_;  // per tensor
  std::vector<at::Tensor> deltas_, averages_;
  std::vector<kernels::llm::TopKPayload> sent_;
  at::Tensor message_;
  std::vector<at::Tensor> gathered_;
  std::uint64_t n_bits_ = 0;
  double padded_elements_ = 0.0, transform_flops_ = 0.0;  // sums over tensors, for the cost model
};

}  // namespace dtsim::algorithms
