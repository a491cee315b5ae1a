// algorithms::AlgorithmSpec: what a scenario says about its algorithm, apart from the
// algorithm itself (algorithm.hpp), so that the scenario and its readers need neither
// LibTorch nor the algorithms.
#pragma once

#include <any>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/lr_schedule.hpp"
#include "config/entry_settings.hpp"
#include "kernels/compressor_spec.hpp"

namespace dtsim::algorithms {

// Local optimizer hyper-parameters, applied as the reference apply_gradient does.
struct OptimizerSpec {
  double lr = 0.1;  // the scenario's; each step runs at StepContext::lr, which lr_schedule derives from it
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  // Per-tensor L2 clipping of d after weight decay, before momentum (the reference DGC's
  // _clip_gradient): d <- (c / |d|) d when |d| >= c. 0: none. Not a scenario field as such:
  // sparsified SGD sets it from its clip_grad_norm, scaled by 1/sqrt(ranks) as the reference does.
  double clip_norm = 0.0;
  LrScheduleSpec lr_schedule;
  // Per parameter tensor: false skips weight decay on it. Not a scenario field: the training
  // loop fills it from the workload's parameter names (weight_decay_mask in
  // apply_gradient.hpp, the reference's parameter groups); empty decays every tensor.
  std::vector<bool> weight_decay_mask;
};

// What a scenario says about an algorithm: the fields several algorithms share, and the
// entry's own settings. algorithm_fields(name) (registry.hpp) lists the fields an algorithm
// reads, and a scenario setting any other is an error.
struct AlgorithmSpec {
  std::string name;     // see algorithm_names()
  std::string variant;  // parallel_sgd: "centralized" or "decentralized"; distopt: "sync", "half", "partial", "sparse"
  OptimizerSpec optimizer;
  kernels::CompressorSpec compressor;  // C, for the compressed algorithms
  // The entry's own settings struct (its fields besides the shared ones above): the
  // entry's parse stores it, its to_json, memory and factory read it back with
  // settings_of<T>. A default is written once, in that struct.
  std::any settings;
  // The workload's parameter names, in parameter order. Not a scenario field: the training
  // loop fills it (runner/rank_program.cpp) for the algorithms that group tensors by name
  // (Streaming DiLoCo's fragments of transformer blocks); empty where nobody filled it.
  std::vector<std::string> parameter_names;
};

// The settings struct the entry's parse stored in spec.settings (config/entry_settings.hpp).
template <class Settings>
const Settings& settings_of(const AlgorithmSpec& spec) {
  return config::entry_settings<Settings>(spec.settings);
}

}  // namespace dtsim::algorithms
