#include <stdexcept>

#include <fmt/format.h>

#include "algorithms/backward_pass.hpp"

namespace dtsim::algorithms {

std::vector<std::size_t> gradient_ready_order(const BackwardPass& backward, std::size_t n_params, const char* who) {
  std::vector<std::size_t> order;
  std::vector<char> seen(n_params, 0);
  for (std::size_t k = 0; k < backward.stages(); ++k)
    for (std::size_t j : backward.stage_params(k)) {
      if (j >= n_params || seen[j])
        throw std::logic_error(fmt::format("{}: backward stage {} lists parameter {} twice or out of range", who, k, j));
      seen[j] = 1;
      order.push_back(j);
    }
  if (order.size() != n_params)
    throw std::logic_error(fmt::format("{}: the backward stages produce {} of {} gradients", who, order.size(), n_params));
  return order;
}

}  // namespace dtsim::algorithms
