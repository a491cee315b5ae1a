#include "comm/wire_bytes.hpp"

namespace dtsim::comm {

namespace {
std::int64_t chunk_elements(std::int64_t elements, int n, int chunk) {
  return elements / n + (chunk < elements % n ? 1 : 0);
}
}  // namespace

std::uint64_t ring_all_reduce_bytes(int rank, int n, std::int64_t elements, std::int64_t element_size) {
  if (n <= 1) return 0;
  const std::int64_t sent =
      2 * elements - chunk_elements(elements, n, (rank + 1) % n) - chunk_elements(elements, n, (rank + 2) % n);
  return static_cast<std::uint64_t>(sent * element_size);
}

std::uint64_t ring_all_gather_bytes(int rank, std::span<const std::int64_t> block_bytes) {
  const int n = static_cast<int>(block_bytes.size());
  if (n <= 1) return 0;
  std::int64_t total = 0;
  for (auto b : block_bytes) total += b;
  return static_cast<std::uint64_t>(total - block_bytes[(rank + 1) % n]);
}

std::uint64_t binomial_broadcast_bytes(int rank, int n, int root, std::int64_t bytes) {
  const int v = ((rank - root) % n + n) % n;
  // v sends in every round 2^k > v with v + 2^k < n.
  std::uint64_t children = 0;
  for (int mask = 1; mask < n; mask <<= 1)
    if (v < mask && v + mask < n) ++children;
  return children * static_cast<std::uint64_t>(bytes);
}

}  // namespace dtsim::comm
