#include "kernels/fusion_buckets.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::kernels {

std::vector<std::vector<std::size_t>> fusion_buckets(std::span<const std::int64_t> sizes, std::int64_t threshold) {
  if (threshold < 0) throw std::invalid_argument(fmt::format("fusion_buckets: threshold {} is negative", threshold));
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> staged;
  std::int64_t staged_elements = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) throw std::invalid_argument(fmt::format("fusion_buckets: tensor {} has size {}", i, sizes[i]));
    if (sizes[i] > threshold) {
      buckets.push_back({i});
      continue;
    }
    staged.push_back(i);
    staged_elements += sizes[i];
    if (staged_elements > threshold) {
      buckets.push_back(std::move(staged));
      staged.clear();
      staged_elements = 0;
    }
  }
  if (!staged.empty()) buckets.push_back(std::move(staged));
  return buckets;
}

}  // namespace dtsim::kernels
