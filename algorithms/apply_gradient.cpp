#include "algorithms/apply_gradient.hpp"

#include <optional>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::algorithms {

LocalOptimizer::LocalOptimizer(OptimizerSpec spec) : spec_(std::move(spec)) {}

void LocalOptimizer::apply_gradient(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads, double lr) {
  update(params, grads, lr);
}

void LocalOptimizer::transform_gradient(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) {
  update(params, grads, std::nullopt);
}

void LocalOptimizer::update(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads, std::optional<double> lr) {
  const auto& mask = spec_.weight_decay_mask;
  if (!mask.empty() && mask.size() != params.size())
    throw std::logic_error(fmt::format("LocalOptimizer: a weight-decay mask of {} tensors for {} parameters", mask.size(),
                                       params.size()));
  const bool first = momentum_buffers_.empty();
  if (first) momentum_buffers_.resize(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto& p = params[i];
    auto& g = grads[i];
    const bool decays = spec_.weight_decay != 0.0 && (mask.empty() || mask[i]);
    at::Tensor d = decays ? g.add(p, spec_.weight_decay) : g.clone();
    if (spec_.clip_norm > 0.0) {
      const double norm = d.norm().item<double>();
      if (norm >= spec_.clip_norm) d.mul_(spec_.clip_norm / norm);
    }
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
    if (lr)
      p.add_(d, -*lr);
    else
      g.copy_(d);
  }
}

std::vector<bool> weight_decay_mask(const std::vector<std::string>& names) {
  std::vector<bool> mask;
  for (const auto& name : names) mask.push_back(name.find("bn") == std::string::npos);
  return mask;
}

sim::ComputeCost LocalOptimizer::cost(std::int64_t elements) const {
  const double n = static_cast<double>(elements);
  // Reads g, p, buf; writes d, buf, p: six fp32 streams; about six flops per element.
  // Clipping reads d once more for its norm (and scales it: counted, as it may).
  if (spec_.clip_norm > 0.0) return {9.0 * n, 32.0 * n};
  return {6.0 * n, 24.0 * n};
}

std::int64_t total_elements(const std::vector<at::Tensor>& tensors) {
  std::int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

}  // namespace dtsim::algorithms
