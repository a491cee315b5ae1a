// algorithms::optimizers: the local (inner) optimizers, as a registry of their own, for the
// algorithms that run an optimizer other than the reference's SGD on each rank (DiLoCo's
// inner AdamW, 1-bit Adam's warm-up, DeMo's sign step). Each keeps its state per parameter
// tensor, counts its own steps (Adam's bias corrections use them, not the run's step
// index), and updates the parameters in place at the lr it is given:
//
//   sgd    torch.optim.SGD     (sgd.cpp)   d = g + wd p; buf = d (first step),
//                                          buf = mu buf + (1 - tau) d; d = d + mu buf
//                                          (Nesterov) or buf; p -= lr d
//   adam   torch.optim.Adam    (adam.cpp)  g = g + wd p (L2); m = b1 m + (1 - b1) g;
//                                          v = b2 v + (1 - b2) g^2; v_max = max(v_max, v)
//                                          (amsgrad); p -= lr/(1 - b1^t) m /
//                                          (sqrt(v or v_max) / sqrt(1 - b2^t) + eps)
//   adamw  torch.optim.AdamW   (adam.cpp)  p = p (1 - lr wd) (decoupled), then Adam's
//                                          update without the L2 term
//
// Each follows PyTorch 1.13's single-tensor code path operation by operation (the same ATen
// calls on the same operands, scalars computed in double as Python does), so on the same
// LibTorch the trajectories are PyTorch's bit for bit (tests/optimizers_test.cpp).
// Per tensor, weight decay can be switched off (weight_decay_mask: the reference's
// parameter groups, as algorithms/apply_gradient.hpp).
//
// Adding an optimizer: its .cpp with the class and its entry (with its settings struct in
// its .hpp if it has hyper-parameters of its own), one line in optimizer.cpp's table, its
// fields' description lines in algorithm_docs.cpp; parse_optimizer, optimizer_json, the
// checks of configs built in code and the generated schema read the entries.
#pragma once

#include <ATen/ATen.h>

#include <any>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/entry_settings.hpp"
#include "config/object_reader.hpp"
#include "sim/compute_cost.hpp"

namespace dtsim::algorithms::optimizers {

// What every optimizer shares (its name, the weight decay, the per-tensor mask) and its own
// hyper-parameters: its settings struct (sgd.hpp's SgdSettings, adam.hpp's AdamSettings,
// read with optimizer_settings<T>), where each default is written once.
struct OptimizerConfig {
  std::string name = "sgd";
  double weight_decay = 0.0;  // sgd, adam: L2 added to the gradient; adamw: decoupled
  std::any settings;          // the optimizer's settings struct; empty: its defaults
  // Per parameter tensor: false skips weight decay on it; empty decays every tensor. Not a
  // scenario field (the training loop's parameter groups, as OptimizerSpec's).
  std::vector<bool> weight_decay_mask;
};

// The optimizer's settings struct stored in config.settings, or its defaults when none is.
template <class Settings>
const Settings& optimizer_settings(const OptimizerConfig& config) {
  return config::entry_settings<Settings>(config.settings);
}

// The same struct for writing (a config built in code), stored with its defaults first.
template <class Settings>
Settings& edit_settings(OptimizerConfig& config) {
  if (!config.settings.has_value()) config.settings = Settings{};
  return std::any_cast<Settings&>(config.settings);
}

class Optimizer {
 public:
  explicit Optimizer(OptimizerConfig config) : config_(std::move(config)) {}
  virtual ~Optimizer() = default;

  // One step: every params[i] updated in place from grads[i] (left as they are) at `lr`.
  // The first call fixes the number of tensors (std::invalid_argument on another).
  void step(std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads, double lr);
  // Bytes of the state it keeps (momentum buffers, moments), now.
  virtual std::uint64_t state_bytes() const = 0;
  // What one step reads, writes and computes over `elements` parameters (fp32).
  virtual sim::ComputeCost cost(std::int64_t elements) const = 0;
  // Steps taken so far (t of the bias corrections after the next step is steps() + 1).
  std::int64_t steps() const { return steps_; }
  const OptimizerConfig& config() const { return config_; }

 protected:
  // Updates tensor i; `decays`: weight decay applies to it. Called once per tensor per step,
  // in order, after steps() was advanced.
  virtual void update(std::size_t i, at::Tensor& p, const at::Tensor& g, double lr, bool decays) = 0;
  virtual void resize(std::size_t tensors) = 0;

 private:
  OptimizerConfig config_;
  std::int64_t steps_ = 0;
  std::size_t tensors_ = 0;
};

struct OptimizerEntry {
  std::string name;
  std::string description;  // one line
  std::string paper;        // the paper, and the PyTorch class it reproduces
  // The keys of an optimizer object besides "name" it reads, weight_decay first, then its
  // settings' in the order its parse reads them.
  std::vector<std::string> fields;
  double default_weight_decay = 0.0;  // PyTorch's default (AdamW: 0.01)
  std::unique_ptr<Optimizer> (*make)(const OptimizerConfig& config);
  // Its settings: `parse` reads its own fields (each default and range written once, here
  // and in its struct) into config.settings; `to_json` writes them back.
  void (*parse)(config::ObjectReader& reader, OptimizerConfig& config);
  void (*to_json)(const OptimizerConfig& config, nlohmann::json& out);
  // Model-sized buffers it keeps between steps (sgd: the momentum buffer, if any; adam: m
  // and v, and v_max with amsgrad), for the memory estimates.
  double (*state_buffers)(const OptimizerConfig& config);
};

// In table order: sgd, adam, adamw.
std::span<const OptimizerEntry* const> optimizer_entries();
// nullptr when none has that name.
const OptimizerEntry* find_optimizer(std::string_view name);
// The entry called `name`; std::invalid_argument naming the known ones otherwise.
const OptimizerEntry& optimizer_entry(std::string_view name);
std::vector<std::string> optimizer_names();

// Model-sized buffers config's optimizer keeps between steps (its entry's state_buffers).
double optimizer_state_buffers(const OptimizerConfig& config);

// config.name's optimizer; std::invalid_argument for an unknown name or a value out of range.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);

// An optimizer object {"name": "adamw", "beta1": 0.9, ...} (what a later algorithm's
// "inner_optimizer" field holds): the name, then only the fields that optimizer reads, each
// checked (ScenarioError naming its JSON Pointer). `fallback`: the name when absent.
OptimizerConfig parse_optimizer(config::ObjectReader& o, const std::string& fallback = "sgd");
// Every field the optimizer reads, defaults filled in: parse_optimizer of it gives `config` again.
nlohmann::json optimizer_json(const OptimizerConfig& config);

}  // namespace dtsim::algorithms::optimizers
