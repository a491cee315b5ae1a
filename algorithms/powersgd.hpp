// PowerSGD (Vogels, Karimireddy, Jaggi, NeurIPS 2019) over one group of tensors packed in a
// flat fp32 buffer b, with the semantics of PyTorch's PowerSGDState / powerSGD_hook, to the
// draw: used per bucket by ddp's powersgd hook and over the whole model by
// sparsified_sgd's powersgd compressor. Each tensor is viewed as a matrix n x m (first
// dimension by the rest); it is compressed at rank r = min(n, m, rank) when
// (n + m) r min_compression_rate < n m (PyTorch's _should_compress), otherwise sent as it
// is with the other uncompressed ones (in buffer order).
//
// As the hook does, the compressed matrices are taken grouped by shape (n, m), the shapes
// in order of first appearance in the buffer: P's and Q's memory is laid out, Q drawn and
// every loop run in that order. A draw of Q takes one randint(1e9) from the rank's
// NumPy RandomState(random_seed) (shared by its groups, as the hook's state is by its
// buckets), seeds a CPU generator with it and fills each Q with randn in turn.
// Orthogonalization is Gram-Schmidt up to rank 2 and Householder QR (torch.linalg.qr)
// above, as the hook's _orthogonalize.
//
// One step is three local phases around three collectives, issued by the caller:
//   first_half(b):  [error feedback: M = b + e, M0 = M]; the uncompressed tensors packed;
//                   Q drawn from N(0, 1) (or kept: warm start) and orthogonalized; P = M Q
//   -- all-reduce: uncompressed (average), P (sum) --
//   second_half(b): the uncompressed average back into b; P orthogonalized; Q = M^T P
//   -- all-reduce: Q (average) --
//   decompress(b):  M = P Q^T into b; [error feedback: e = M0 - b]
// b then holds every rank's same approximation of the average of the M's.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "algorithms/numpy_random_state.hpp"
#include "algorithms/powersgd_options.hpp"
#include "sim/compute_cost.hpp"

namespace dtsim::algorithms {

// One tensor's place in the flat buffer and its matrix view.
struct PowerSgdSlot {
  std::int64_t offset = 0;  // element offset in the buffer
  std::int64_t n = 1, m = 1;  // first dimension x the rest
  std::int64_t r = 0;         // min(n, m, rank) when compressed, else 0
};

// The slot of a tensor of `shape` at `offset`, compressed or not by the settings' rule.
PowerSgdSlot powersgd_slot(at::IntArrayRef shape, std::int64_t offset, const PowerSgdSettings& settings);

// PyTorch's _orthogonalize for one matrix (rows x r, r <= rows), in place: Gram-Schmidt
// (with epsilon) for r <= 2 or half precision, Householder QR's Q otherwise.
void powersgd_orthogonalize(at::Tensor& matrix, double epsilon);
// PyTorch's _orthogonalize_gram_schmidt, whatever the rank.
void powersgd_gram_schmidt(at::Tensor& matrix, double epsilon);

class PowerSgdGroup {
 public:
  PowerSgdGroup() = default;
  PowerSgdGroup(std::vector<PowerSgdSlot> slots, const at::TensorOptions& options, const PowerSgdSettings& settings);

  // `random`: the rank's RandomState, drawn from when Q is (re)initialised.
  void first_half(at::Tensor& buffer, NumpyRandomState& random);
  void second_half(at::Tensor& buffer);
  void decompress(at::Tensor& buffer);
  // What each phase reads, writes and computes (its modelled cost).
  sim::ComputeCost first_cost() const;
  sim::ComputeCost second_cost() const;
  sim::ComputeCost decompress_cost() const;

  // The collectives' tensors: all-reduce the first as an average, P as a sum, Q as an average.
  at::Tensor& uncompressed() { return uncompressed_; }
  at::Tensor& p_memory() { return p_memory_; }
  at::Tensor& q_memory() { return q_memory_; }
  // The compressed tensors' P (n x r) and Q (m x r) views, in the hook's order (grouped
  // by shape, compressed_order()).
  std::vector<at::Tensor> ps() const { return low_rank_views(p_memory_, true); }
  std::vector<at::Tensor> qs() const { return low_rank_views(q_memory_, false); }
  const std::vector<PowerSgdSlot>& slots() const { return slots_; }
  // Indices into slots() of the compressed tensors, in the hook's order.
  const std::vector<std::size_t>& compressed_order() const { return compressed_; }
  // 32 bits per element of the three collectives: (n + m) r per compressed matrix plus one
  // per uncompressed element.
  std::uint64_t n_bits() const;
  // What carries from step to step: e and, with warm start, Q.
  std::uint64_t state_bytes() const;

 private:
  std::int64_t elements() const;
  std::vector<at::Tensor> low_rank_views(const at::Tensor& memory, bool p) const;
  at::Tensor matrix(at::Tensor& buffer, const PowerSgdSlot& s) const {
    return buffer.narrow(0, s.offset, s.n * s.m).view({s.n, s.m});
  }

  std::vector<PowerSgdSlot> slots_;
  std::vector<std::size_t> compressed_;  // compressed_order()
  PowerSgdSettings settings_;
  at::Tensor uncompressed_;        // the uncompressed tensors, concatenated
  at::Tensor p_memory_, q_memory_;  // every compressed tensor's P, Q, flat
  at::Tensor error_;               // e, once PowerSGD has run (error feedback)
  at::Tensor input_copy_;          // M0 of the current step
  bool have_q_ = false;            // Q holds the previous step's (warm start)
};

}  // namespace dtsim::algorithms
