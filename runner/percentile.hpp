// The nearest-rank percentile: the smallest value with at least p % of the values at or
// below it (p in [0, 100]; 0 for no values). Step-time percentiles in result files and
// sweep tables are this.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace dtsim::runner {

inline double nearest_rank_percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(p / 100.0 * n)));
  return values[std::min(rank, values.size()) - 1];
}

}  // namespace dtsim::runner
