#include "algorithms/optimizers/optimizer.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::algorithms::optimizers {

// Each entry is defined with its optimizer (the file named on its line).
const OptimizerEntry& sgd_entry();    // sgd.cpp
const OptimizerEntry& adam_entry();   // adam.cpp
const OptimizerEntry& adamw_entry();  // adam.cpp

std::span<const OptimizerEntry* const> optimizer_entries() {
  static const std::vector<const OptimizerEntry*> table{&sgd_entry(), &adam_entry(), &adamw_entry()};
  return table;
}

const OptimizerEntry* find_optimizer(std::string_view name) {
  for (const auto* e : optimizer_entries())
    if (e->name == name) return e;
  return nullptr;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const auto* e : optimizer_entries()) names.push_back(e->name);
  return names;
}

namespace {

// The ranges parse_optimizer enforces, checked again for configs built in code.
void check(const OptimizerConfig& c) {
  auto fail = [&](const char* field, double v, const char* expected) {
    throw std::invalid_argument(fmt::format("optimizer {}: {} = {}, expected {}", c.name, field, v, expected));
  };
  if (!(c.weight_decay >= 0.0)) fail("weight_decay", c.weight_decay, ">= 0");
  if (!(c.momentum >= 0.0)) fail("momentum", c.momentum, ">= 0");
  if (!(c.dampening >= 0.0 && c.dampening <= 1.0)) fail("dampening", c.dampening, "in [0, 1]");
  if (c.nesterov && (c.momentum <= 0.0 || c.dampening != 0.0))
    throw std::invalid_argument(
        fmt::format("optimizer {}: nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD)", c.name));
  if (!(c.beta1 >= 0.0 && c.beta1 < 1.0)) fail("beta1", c.beta1, "in [0, 1)");
  if (!(c.beta2 >= 0.0 && c.beta2 < 1.0)) fail("beta2", c.beta2, "in [0, 1)");
  if (!(c.eps >= 0.0)) fail("eps", c.eps, ">= 0");
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  const auto* entry = find_optimizer(config.name);
  if (!entry)
    throw std::invalid_argument(
        fmt::format("optimizer '{}' is none of {}", config.name, fmt::join(optimizer_names(), ", ")));
  check(config);
  return entry->make(config);
}

void Optimizer::step(std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads, double lr) {
  if (params.size() != grads.size())
    throw std::invalid_argument(
        fmt::format("optimizer {}: {} parameters and {} gradients", config_.name, params.size(), grads.size()));
  const auto& mask = config_.weight_decay_mask;
  if (!mask.empty() && mask.size() != params.size())
    throw std::invalid_argument(fmt::format("optimizer {}: a weight-decay mask of {} tensors for {} parameters",
                                            config_.name, mask.size(), params.size()));
  if (steps_ == 0) {
    tensors_ = params.size();
    resize(tensors_);
  } else if (params.size() != tensors_) {
    throw std::invalid_argument(fmt::format("optimizer {}: {} tensors, its state holds {}", config_.name, params.size(),
                                            tensors_));
  }
  ++steps_;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const bool decays = config_.weight_decay != 0.0 && (mask.empty() || mask[i]);
    update(i, params[i], grads[i], lr, decays);
  }
}

OptimizerConfig parse_optimizer(config::ObjectReader& o, const std::string& fallback) {
  OptimizerConfig c;
  c.name = o.choice("name", fallback, optimizer_names());
  const auto& entry = *find_optimizer(c.name);
  const std::vector<std::string> except{"name"};
  o.only_fields(entry.fields, except, "optimizer " + c.name);
  using config::kInf;
  auto reads = [&](const char* f) { return std::count(entry.fields.begin(), entry.fields.end(), f) > 0; };
  c.weight_decay = o.number("weight_decay", entry.default_weight_decay, 0.0, kInf);
  if (reads("momentum")) {
    c.momentum = o.number("momentum", 0.0, 0.0, kInf);
    c.dampening = o.number("dampening", 0.0, 0.0, 1.0);
    c.nesterov = o.boolean("nesterov", false);
    if (c.nesterov && (c.momentum <= 0.0 || c.dampening != 0.0))
      throw config::ScenarioError(o.where("nesterov"), config::ErrorKind::inconsistent,
                                  "nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD)");
  }
  if (reads("beta1")) {
    c.beta1 = o.number("beta1", 0.9, 0.0, 1.0);
    c.beta2 = o.number("beta2", 0.999, 0.0, 1.0);
    if (c.beta1 >= 1.0)
      throw config::ScenarioError(o.where("beta1"), config::ErrorKind::out_of_range, "expected a value in [0, 1), got 1");
    if (c.beta2 >= 1.0)
      throw config::ScenarioError(o.where("beta2"), config::ErrorKind::out_of_range, "expected a value in [0, 1), got 1");
    c.eps = o.number("eps", 1e-8, 0.0, kInf);
    c.amsgrad = o.boolean("amsgrad", false);
  }
  o.finish();
  return c;
}

nlohmann::json optimizer_json(const OptimizerConfig& c) {
  const auto& entry = *find_optimizer(c.name);
  nlohmann::json out = {{"name", c.name}, {"weight_decay", c.weight_decay}};
  for (const auto& f : entry.fields) {
    if (f == "momentum") out[f] = c.momentum;
    if (f == "dampening") out[f] = c.dampening;
    if (f == "nesterov") out[f] = c.nesterov;
    if (f == "beta1") out[f] = c.beta1;
    if (f == "beta2") out[f] = c.beta2;
    if (f == "eps") out[f] = c.eps;
    if (f == "amsgrad") out[f] = c.amsgrad;
  }
  return out;
}

}  // namespace dtsim::algorithms::optimizers
