// Bytes each rank puts on the wire for each operation, under the algorithms the network
// models decompose collectives into (network_models/network_model.hpp). Every backend
// reports these figures, so emulated and live runs count identical traffic even when
// the live library picks another algorithm internally.
#pragma once

#include <cstdint>
#include <span>

namespace dtsim::comm {

// Ring all-reduce of `elements` elements split into `n` chunks as evenly as possible
// (the first elements % n chunks one element longer). In reduce-scatter rank r sends
// every chunk but (r+1) mod n; in all-gather every chunk but (r+2) mod n.
std::uint64_t ring_all_reduce_bytes(int rank, int n, std::int64_t elements, std::int64_t element_size);

// Ring all-gather: rank r forwards every block but that of rank (r+1) mod n.
std::uint64_t ring_all_gather_bytes(int rank, std::span<const std::int64_t> block_bytes);

// Binomial-tree broadcast: bytes times the number of children of `rank`.
std::uint64_t binomial_broadcast_bytes(int rank, int n, int root, std::int64_t bytes);

}  // namespace dtsim::comm
