// comm::ComputeTiming: how compute phases advance a rank's simulated clock, in a header
// of its own (a scenario holds one; nothing that only holds one needs the emulated world).
#pragma once

#include <functional>
#include <vector>

#include "sim/compute_cost.hpp"

namespace dtsim::comm {

// How compute phases advance a rank's simulated clock.
struct ComputeTiming {
  enum class Kind { CostModel, Measured };
  Kind kind = Kind::CostModel;  // the default: deterministic, reproducible outputs
  sim::ComputeModel model;
  // Per-rank slowdown factors (stragglers): rank r's compute takes slowdown[r] times
  // longer. Empty means 1 for every rank.
  std::vector<double> slowdown;

  // Runs `work` and returns its seconds: measured (waiting for a GPU's queued work around
  // it), or the cost model's for `cost`. Before any straggler slowdown.
  double run(const sim::ComputeCost& cost, const std::function<void()>& work) const;
};

}  // namespace dtsim::comm
