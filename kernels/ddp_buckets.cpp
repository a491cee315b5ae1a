#include "kernels/ddp_buckets.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::kernels {

std::vector<std::vector<std::size_t>> ddp_buckets(std::span<const std::int64_t> sizes, std::int64_t first_cap,
                                                  std::int64_t cap) {
  if (first_cap < 0 || cap < 0)
    throw std::invalid_argument(fmt::format("ddp_buckets: caps {} and {} bytes, expected >= 0", first_cap, cap));
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> open;
  std::int64_t open_bytes = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) throw std::invalid_argument(fmt::format("ddp_buckets: tensor {} has {} bytes", i, sizes[i]));
    open.push_back(i);
    open_bytes += sizes[i];
    const std::int64_t limit = buckets.empty() ? first_cap : cap;
    if (open_bytes >= limit) {
      buckets.push_back(std::move(open));
      open.clear();
      open_bytes = 0;
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace dtsim::kernels
