#include "algorithms/local_update.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dtsim::algorithms {

LocalUpdate::LocalUpdate(const AlgorithmSpec& spec, const std::optional<optimizers::OptimizerConfig>& object)
    : sgd_(spec.optimizer), object_(object ? make_rank_optimizer(*object, spec) : nullptr) {}

void LocalUpdate::apply(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads, double lr) {
  if (object_)
    object_->step(params, grads, lr);
  else
    sgd_.apply_gradient(params, grads, lr);
}

sim::ComputeCost LocalUpdate::cost(std::int64_t elements) const {
  return object_ ? object_->cost(elements) : sgd_.cost(elements);
}

std::unique_ptr<optimizers::Optimizer> make_rank_optimizer(optimizers::OptimizerConfig config,
                                                           const AlgorithmSpec& spec) {
  config.weight_decay_mask = spec.optimizer.weight_decay_mask;
  return optimizers::make_optimizer(config);
}

double extra_optimizer_buffers(const optimizers::OptimizerConfig& c) {
  return std::max(0.0, optimizers::optimizer_state_buffers(c) - 1.0);
}

std::optional<optimizers::OptimizerConfig> parse_optimizer_object(config::ObjectReader& a, const OptimizerSpec& sgd_fields) {
  if (!a.value().contains("optimizer")) return std::nullopt;
  const std::pair<const char*, bool> replaced[] = {{"momentum", sgd_fields.momentum != 0.0},
                                                   {"dampening", sgd_fields.dampening != 0.0},
                                                   {"weight_decay", sgd_fields.weight_decay != 0.0},
                                                   {"nesterov", sgd_fields.nesterov}};
  for (const auto& [key, set] : replaced)
    if (set)
      throw config::ScenarioError(a.where(key), config::ErrorKind::inconsistent,
                                  fmt::format("set {} in /algorithm/optimizer: the optimizer object replaces the "
                                              "algorithm-level SGD fields",
                                              key));
  auto o = a.object("optimizer", true);
  return optimizers::parse_optimizer(o, "sgd");
}

}  // namespace dtsim::algorithms
