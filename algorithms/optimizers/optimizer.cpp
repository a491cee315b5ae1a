#include "algorithms/optimizers/optimizer.hpp"

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

// A config built in code, checked by its entry's own parse reading it back (the ranges are
// written once, there): std::invalid_argument naming the field.
void check(const OptimizerConfig& c, const OptimizerEntry& entry) {
  nlohmann::json written;
  try {
    written = optimizer_json(c);
  } catch (const std::bad_any_cast&) {
    throw std::invalid_argument(fmt::format("optimizer {}: settings of another optimizer", c.name));
  }
  try {
    config::ObjectReader reader(written, "");
    parse_optimizer(reader, entry.name);
  } catch (const config::ScenarioError& e) {  // "/field: message" -> "optimizer adam: field: message"
    const std::string what = e.what(), field = e.path().empty() ? "" : e.path().substr(1);
    const std::string message = what.size() > e.path().size() + 2 ? what.substr(e.path().size() + 2) : what;
    throw std::invalid_argument(fmt::format("optimizer {}: {}: {}", c.name, field, message));
  }
}

}  // namespace

const OptimizerEntry& optimizer_entry(std::string_view name) {
  if (const auto* entry = find_optimizer(name)) return *entry;
  throw std::invalid_argument(fmt::format("optimizer '{}' is none of {}", name, fmt::join(optimizer_names(), ", ")));
}

double optimizer_state_buffers(const OptimizerConfig& config) {
  return optimizer_entry(config.name).state_buffers(config);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  const auto& entry = optimizer_entry(config.name);
  check(config, entry);
  return entry.make(config);
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
  c.weight_decay = o.number("weight_decay", entry.default_weight_decay, 0.0, config::kInf);
  entry.parse(o, c);
  o.finish();
  return c;
}

nlohmann::json optimizer_json(const OptimizerConfig& c) {
  const auto& entry = *find_optimizer(c.name);
  nlohmann::json out = {{"name", c.name}, {"weight_decay", c.weight_decay}};
  entry.to_json(c, out);
  return out;
}

}  // namespace dtsim::algorithms::optimizers
