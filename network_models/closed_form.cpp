#include "network_models/closed_form.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace dtsim::net {

double closed_form_seconds(const CollectiveSpec& c, double a, double beta) {
  const double n = c.ranks;
  if (c.ranks == 1) return 0.0;
  const double S = static_cast<double>(c.elements * c.element_size);
  auto log2_floor = [](int x) { int h = 0; while ((2 << h) <= x) ++h; return h; };
  using A = Algorithm;
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      switch (c.algorithm) {
        case A::Ring: return 2.0 * (n - 1) * (a + S / (n * beta));
        case A::HalvingDoubling: {
          const int lg = log2_floor(c.ranks);
          const double p = std::ldexp(1.0, lg);
          const double core = 2.0 * lg * a + 2.0 * (p - 1) / p * S / beta;
          return p == n ? core : core + 2.0 * (a + S / beta);
        }
        case A::DoubleBinaryTree: return 2.0 * log2_floor(c.ranks) * (a + S / (2.0 * beta));
        case A::Direct: return 2.0 * (a + S / (n * beta));
        case A::ParameterServer: return 2.0 * (a + S / beta);
        default: break;
      }
      break;
    case CollectiveKind::ReduceScatter:
      if (c.algorithm == A::Ring) return (n - 1) * (a + S / (n * beta));
      if (c.algorithm == A::Direct) return a + S / (n * beta);
      break;
    case CollectiveKind::AllGather: {
      double largest = 0.0;
      for (auto e : c.block_elements) largest = std::max(largest, static_cast<double>(e * c.element_size));
      if (c.algorithm == A::Ring) return (n - 1) * (a + largest / beta);
      if (c.algorithm == A::Direct) return a + largest / beta;
      break;
    }
    case CollectiveKind::Broadcast:
      if (c.algorithm == A::Binomial) return std::ceil(std::log2(n)) * (a + S / beta);
      break;
  }
  throw std::invalid_argument(fmt::format("no closed form for {} with \"{}\"", to_string(c.kind), to_string(c.algorithm)));
}

Algorithm cheapest_algorithm(const CollectiveSpec& spec, double alpha_s, double beta) {
  Algorithm best = Algorithm::Auto;
  double best_time = std::numeric_limits<double>::infinity();
  for (Algorithm a : auto_candidates(spec.kind)) {
    CollectiveSpec c = spec;
    c.algorithm = a;
    const double t = closed_form_seconds(c, alpha_s, beta);
    if (t < best_time) {
      best_time = t;
      best = a;
    }
  }
  return best;
}

}  // namespace dtsim::net
