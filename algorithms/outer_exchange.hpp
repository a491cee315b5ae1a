// The DiLoCo family's outer-gradient exchange: every rank holds its outer gradient Delta_r
// (theta - theta_r, per parameter tensor) and needs Delta = (1/R) sum_r Delta_r.
//
//   codec none  fp32 all-reduce (Average): 32 d bits
//   codec bf16  every tensor rounded to bf16 (round to nearest even): 16 d bits
//   codec int8  INTELLECT-1's codebook per tensor (kernels/llm_codecs.hpp int8_encode):
//               8 n + 8192 bits per tensor of n elements
//   codec fp4   FP4 E3M0 per tensor, one fp32 scale per `fp4_block` elements (0: one per
//               tensor; kernels/llm_codecs.hpp fp4_encode): 4 n + 32 blocks bits, plus 4 when
//               n is odd (the padding nibble)
//
// With a codec the ranks' encoded messages are all-gathered (the sum of two encoded
// vectors is not an encoded vector: a compressed all-reduce would re-encode partial sums
// at every hop), then every rank decodes all R messages, its own included, and averages
// them in fp32: the sum in rank order, then / R, the order of the emulated fp32
// all-reduce. n_bits: what the rank sends, the message's exact payload bits (each
// codec's bits()); the wire bytes are the all-gather's, counted by the network.
//
// start() encodes and issues the collective without waiting for it, join() waits and
// writes the average into the tensors, so a caller can keep training in between
// (Streaming DiLoCo's overlap); DiLoCo joins at once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "kernels/tensor_buffer.hpp"
#include "sim/task.hpp"

namespace dtsim::algorithms {

enum class OuterCodec { none, bf16, int8, fp4 };

// "none", "bf16", "int8", "fp4", in the enum's order.
const std::vector<std::string>& outer_codec_names();
OuterCodec outer_codec_named(const std::string& name);  // std::invalid_argument for another name
const std::string& outer_codec_name(OuterCodec codec);

// The exact bits one rank sends for tensors of `numels` elements (the closed forms above).
std::uint64_t outer_codec_bits(OuterCodec codec, const std::vector<std::int64_t>& numels, std::int64_t fp4_block);

class OuterExchange {
 public:
  OuterExchange(OuterCodec codec, std::int64_t fp4_block) : codec_(codec), fp4_block_(fp4_block) {}

  // Encodes `delta` (this rank's Delta_r, fp32 tensors; left as they are) and issues the
  // collective; returns the bits sent. `delta` must stay alive and untouched until join().
  sim::Task<std::uint64_t> start(comm::Communicator& comm, std::vector<at::Tensor>& delta);
  // Waits for the collective and writes Delta = (1/R) sum_r Delta_r into `delta`.
  sim::Task<void> join(comm::Communicator& comm);
  bool in_flight() const { return in_flight_; }
  OuterCodec codec() const { return codec_; }

 private:
  // The bytes of tensor i's message in a rank's concatenated message.
  std::int64_t message_bytes(std::int64_t numel) const;
  at::Tensor encode(const at::Tensor& x) const;  // one tensor's message, uint8
  void decode_add(const at::Tensor& message, at::Tensor& out, bool accumulate) const;

  OuterCodec codec_;
  std::int64_t fp4_block_;
  std::vector<at::Tensor>* delta_ = nullptr;
  kernels::TensorBuffer flat_;          // the fp32 all-reduce's buffer, or the decoded messages' sum
  at::Tensor message_;                  // this rank's encoded message (uint8)
  std::vector<at::Tensor> gathered_;    // every rank's message
  comm::Op op_;
  bool in_flight_ = false;
};

}  // namespace dtsim::algorithms
