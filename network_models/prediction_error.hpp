// net::ErrorSummary: how far predictions are from measurements over a curve's points, as
// bench/results/nccl-validation.md and `dtsim collective --against` report it: the median,
// geometric mean and worst of |error| per point, error = predicted / measured - 1 (of
// busbw; of the measured over the predicted time, the same thing).
#pragma once

#include <cstdint>
#include <vector>

namespace dtsim::net {

struct PointError {
  std::int64_t bytes = 0;
  double error = 0.0;  // predicted / measured - 1
};

struct ErrorSummary {
  int points = 0;
  double median = 0.0, geomean = 0.0, worst = 0.0;  // of |error|; 0 without points
  std::int64_t worst_bytes = 0;
};

// Over the points of at least `min_bytes` bytes. The geometric mean counts an exact point
// as 1e-12.
ErrorSummary summarize_errors(const std::vector<PointError>& points, std::int64_t min_bytes = 0);

}  // namespace dtsim::net
