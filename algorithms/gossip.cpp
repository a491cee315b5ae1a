#include "algorithms/gossip.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "kernels/compressor.hpp"
#include "kernels/compressor_kinds.hpp"

namespace dtsim::algorithms {

Neighborhood Neighborhood::of(const net::Topology& topology, int rank) {
  Neighborhood n;
  n.peers = topology.neighbors(rank);
  const auto row = topology.mixing_row(rank);
  n.self_weight = row.at(static_cast<std::size_t>(rank));
  for (int peer : n.peers) n.peer_weights.push_back(row.at(static_cast<std::size_t>(peer)));
  return n;
}

kernels::Compressor make_gossip_compressor(const kernels::CompressorSpec& spec, int rank, const char* algorithm) {
  const auto& kind = kernels::compressor_kind_info(spec.kind);
  if (kind.size_depends_on_data)
    throw std::invalid_argument(fmt::format(
        "{}: compressor {} is not supported (its payload size depends on the data; gossip exchanges "
        "equal-size messages)",
        algorithm, kind.name));
  kernels::CompressorSpec own = spec;
  if (!(kind.shares_draws && kind.shares_draws(spec))) {
    // splitmix64 of (seed, rank): independent streams per rank.
    std::uint64_t z = spec.seed + 0x9E3779B97F4A7C15ULL * (static_cast<std::uint64_t>(rank) + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    own.seed = z ^ (z >> 31);
  }
  try {
    return kernels::make_compressor(own);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", algorithm, e.what()));
  }
}

sim::ComputeCost elementwise_cost(std::int64_t elements, double flops_per_element, double bytes_per_element) {
  const double n = static_cast<double>(elements);
  return {flops_per_element * n, bytes_per_element * n};
}

void GossipMessage::compress(kernels::Compressor& compressor, const at::Tensor& flat,
                             std::span<const std::int64_t> segments) {
  compressor.compress(flat, segments, payload_);
}

comm::Op GossipMessage::exchange(comm::Communicator& comm, std::span<const int> peers) {
  return comm.exchange(payload_.bytes, peers, received_);
}

void GossipMessage::add_own(kernels::Compressor& compressor, double weight, at::Tensor& dense) const {
  compressor.decompress_add(payload_, weight, dense);
}

void GossipMessage::add_peer(kernels::Compressor& compressor, std::size_t k, double weight, at::Tensor& dense) {
  peer_.kind = payload_.kind;
  peer_.dtype = payload_.dtype;
  peer_.numel = payload_.numel;
  peer_.segments = payload_.segments;
  peer_.round = payload_.round;
  peer_.bytes = received_.at(k);
  compressor.decompress_add(peer_, weight, dense);
}

std::vector<double> Neighborhood::self_then_peer_weights() const {
  std::vector<double> w{self_weight};
  w.insert(w.end(), peer_weights.begin(), peer_weights.end());
  return w;
}

std::uint64_t tensor_bytes(const std::vector<at::Tensor>& tensors) {
  std::uint64_t bytes = 0;
  for (const auto& t : tensors)
    if (t.defined()) bytes += static_cast<std::uint64_t>(t.nbytes());
  return bytes;
}

}  // namespace dtsim::algorithms
