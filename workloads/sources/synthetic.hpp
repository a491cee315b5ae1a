// Data source "synthetic"'s settings (sources/synthetic.cpp).
#pragma once

#include <cstdint>

namespace dtsim::workloads {

struct SyntheticSettings {
  std::int64_t samples = 4096;
  std::int64_t features = 32;
  // Every sample scaled to unit L2 norm after its label is drawn (as the normalised
  // epsilon set of the convex experiments).
  bool unit_norm = false;
};

}  // namespace dtsim::workloads
