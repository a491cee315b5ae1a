#include "network_models/prediction_error.hpp"

#include <algorithm>
#include <cmath>

namespace dtsim::net {

ErrorSummary summarize_errors(const std::vector<PointError>& points, std::int64_t min_bytes) {
  ErrorSummary s;
  std::vector<double> errors;
  double log_sum = 0.0;
  for (const auto& p : points) {
    if (p.bytes < min_bytes) continue;
    const double e = std::max(std::abs(p.error), 1e-12);
    errors.push_back(e);
    log_sum += std::log(e);
    if (e > s.worst) {
      s.worst = e;
      s.worst_bytes = p.bytes;
    }
  }
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const std::size_t k = errors.size();
  s.points = static_cast<int>(k);
  s.median = k % 2 ? errors[k / 2] : (errors[k / 2 - 1] + errors[k / 2]) / 2;
  s.geomean = std::exp(log_sum / static_cast<double>(k));
  return s;
}

}  // namespace dtsim::net
