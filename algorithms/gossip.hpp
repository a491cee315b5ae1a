// Shared plumbing of the compressed gossip algorithms (CHOCO-SGD, DCD-PSGD, ECD-PSGD,
// DeepSqueeze): a rank's neighbourhood and mixing weights, its compressor, the reference's
// n_bits convention, and one compressed message exchanged with the neighbours.
//
// Messages are the compressor's real packed payload (a uint8 tensor), sent with
// comm::Communicator::exchange to every gossip neighbour; a receiver decodes a peer's
// bytes with its own copy of the metadata (segment sizes, round), which it knows without
// being told, as in the reference (k depends only on the tensor sizes).
//
// Compressor seeds: random_k indices and QSGD rounding are drawn from (seed, round,
// segment, element). Unless `shared_seed` is set, rank r uses seed mix(seed, r), so ranks
// draw independently (the reference's per-process numpy state); with shared_seed every
// rank uses `seed` and the receivers regenerate the indices, which are then not sent.
// `threshold` is rejected: its payload size depends on the data, and exchange needs equal
// sizes.
//
// n_bits (one message, counted once, the reference's convention; ChocoSGD notes §2):
//   identity      32 d                 (fp16 / bf16: 16 d)
//   top_k         64 K                 32-bit value + 32-bit index per kept element, K = sum_l k_l
//   random_k      64 K                 (32 K with shared_seed: the indices are not sent)
//   sign          32 ceil(d/32)        (no scale is sent)
//   scaled_sign   32 ceil(d/32) + 32 L (the reference's "sign" in CHOCO: per-tensor L1 scales)
//   qsgd          b d                  b = bit_width(s): the reference's quantize_level, as
//                                      s = 2^b - 1 there; the norms are not counted and the
//                                      real codes (1 + b bits, see the wire bytes) differ.
// Every kind but qsgd therefore reports exactly its payload's bits.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.hpp"
#include "kernels/compressor_spec.hpp"
#include "kernels/payload.hpp"
#include "network_models/topology.hpp"
#include "sim/compute_cost.hpp"

namespace dtsim::kernels {
class Compressor;
}

namespace dtsim::algorithms {

// Rank i's gossip neighbourhood: its neighbours N(i) (ascending) and the mixing weights.
struct Neighborhood {
  std::vector<int> peers;
  double self_weight = 1.0;          // w_ii
  std::vector<double> peer_weights;  // w_ij, in peers order
  static Neighborhood of(const net::Topology& topology, int rank);
  std::size_t degree() const { return peers.size(); }
  // w_ii, then w_ij in peers order: the weights of a replica list kept self first.
  std::vector<double> self_then_peer_weights() const;
};

// Bytes held by a list of tensors (e.g. model replicas; undefined ones hold none), for
// Algorithm::state_bytes().
std::uint64_t tensor_bytes(const std::vector<at::Tensor>& tensors);

// The compressor rank `rank` uses for `algorithm` (see the seed rule above); throws
// std::invalid_argument naming the algorithm for threshold or an invalid spec.
kernels::Compressor make_gossip_compressor(const kernels::CompressorSpec& spec, int rank, const char* algorithm);

// Rough costs of the element-wise phases, for the emulated compute model.
sim::ComputeCost elementwise_cost(std::int64_t elements, double flops_per_element, double bytes_per_element);

// One compressed message per round: this rank's payload and its neighbours'.
class GossipMessage {
 public:
  // payload = C(flat), with `segments` (the parameter tensors' element counts).
  void compress(kernels::Compressor& compressor, const at::Tensor& flat, std::span<const std::int64_t> segments);
  // Starts the exchange of the payload with `peers`; do not compress again before
  // the returned Op has been awaited.
  comm::Op exchange(comm::Communicator& comm, std::span<const int> peers);
  // dense += weight * decompress(own payload).
  void add_own(kernels::Compressor& compressor, double weight, at::Tensor& dense) const;
  // dense += weight * decompress(payload received from peers[k]).
  void add_peer(kernels::Compressor& compressor, std::size_t k, double weight, at::Tensor& dense);
  const kernels::Payload& payload() const { return payload_; }

 private:
  kernels::Payload payload_;
  kernels::Payload peer_;  // metadata of a received payload (= payload_'s), bytes swapped in
  std::vector<at::Tensor> received_;
};

}  // namespace dtsim::algorithms
