// net::Perturbations: what makes a network less than its nominal links (per-message
// overhead, seeded jitter, bandwidth changes over time, link failures), as a scenario
// states them; the transport (transport.hpp) applies them.
#pragma once

#include <cstdint>
#include <vector>

namespace dtsim::net {

struct BandwidthChange {
  double time_s;
  int a, b;  // the cable between nodes a and b (both directions)
  double bandwidth_bytes_per_s;
};

struct LinkFailure {
  double time_s;
  int a, b;
};

struct Perturbations {
  double overhead_s = 0.0;
  double jitter_s = 0.0;
  std::uint64_t jitter_seed = 0;
  std::vector<BandwidthChange> bandwidth_trace;
  std::vector<LinkFailure> failures;
};

}  // namespace dtsim::net
