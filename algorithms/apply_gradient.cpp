#include "algorithms/apply_gradient.hpp"

namespace dtsim::algorithms {

void LocalOptimizer::apply_gradient(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads,
                                    bool apply_to_model) {
  const bool first = momentum_buffers_.empty();
  if (first) momentum_buffers_.resize(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto& p = params[i];
    auto& g = grads[i];
    at::Tensor d = spec_.weight_decay != 0.0 ? g.add(p, spec_.weight_decay) : g.clone();
    if (spec_.momentum != 0.0) {
      auto& buf = momentum_buffers_[i];
      if (first)
        buf = d.clone();
      else
        buf.mul_(spec_.momentum).add_(d, 1.0 - spec_.dampening);
      if (spec_.nesterov)
        d.add_(buf, spec_.momentum);
      else
        d.copy_(buf);
    }
    if (apply_to_model)
      p.add_(d, -spec_.lr);
    else
      g.copy_(d);
  }
}

sim::ComputeCost LocalOptimizer::cost(std::int64_t elements) const {
  const double n = static_cast<double>(elements);
  // Reads g, p, buf; writes d, buf, p: six fp32 streams; about six flops per element.
  return {6.0 * n, 24.0 * n};
}

std::int64_t total_elements(const std::vector<at::Tensor>& tensors) {
  std::int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

}  // namespace dtsim::algorithms
