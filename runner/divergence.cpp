#include "runner/divergence.hpp"

#include <cmath>

namespace dtsim::runner {

std::int64_t diverged_at_step(std::span<const double> loss, double final_loss, double consensus_distance) {
  if (loss.empty()) return 0;
  // A first loss of 0 (or below) leaves nothing to grow from: only non-finite values count.
  const double bound = loss.front() > 0.0 ? kDivergenceFactor * loss.front() : HUGE_VAL;
  auto beyond = [bound](double x) { return !std::isfinite(x) || x > bound; };
  for (std::size_t t = 0; t < loss.size(); ++t)
    if (beyond(loss[t])) return static_cast<std::int64_t>(t) + 1;
  if (beyond(final_loss) || !std::isfinite(consensus_distance)) return static_cast<std::int64_t>(loss.size());
  return 0;
}

}  // namespace dtsim::runner
