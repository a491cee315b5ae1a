// Bring your own model: a TorchScript module (torch.jit.save of a scripted or traced
// nn.Module) trained by ModuleWorkload (module_workload.hpp) under autograd, the workload
// type "torchscript".
//
// The module: forward(x) -> logits [B, classes] (loss "cross_entropy": softmax cross-entropy,
// mean over the batch), or forward(x, y) -> the mean loss, or a tuple (loss, logits)
// (loss "module"; without logits the accuracy is reported as 0). x is a batch of samples of
// `input_shape`, which must be the data source's; y the int64 labels. Its parameters, under
// their names in the module (named_parameters, recursively, in registration order), are the
// model: the file's values are every rank's initial parameters (the scenario seed does not
// change them). Buffers (BatchNorm's running statistics) are each rank's own. Every rank
// trains its own copy (torch::jit::Module::clone, which deep-copies parameters and buffers).
//
// The interpreter runs the module's graph without the executor's optimisations
// (GraphOptimizerEnabledGuard(false)): every op is recorded by plain autograd as in eager
// PyTorch, so gradients become ready one op at a time, in the same order on every step, and
// the numbers do not depend on the profiling executor's warm-up runs.
//
// Costs: estimated from the module's convolutions and matrix products in the probe forward
// (op_costs.hpp); the scenario echo says so ("cost": "estimated from ops"). Under the
// scenario's compute timing "measured" the measured times apply instead, as for every
// workload.
//
// A file that is missing, not a TorchScript archive, without a module or a forward method,
// with a forward of the wrong arity for the loss, or whose forward fails on (or returns the
// wrong shape for) two samples of input_shape is refused at parse time with one line
// naming the file (std::invalid_argument from load_torchscript_model; a ScenarioError at
// /workload/model_file in a scenario).
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/labelled_data.hpp"
#include "workloads/module_workload.hpp"

namespace dtsim::workloads {

// The "torchscript" workload's own settings (WorkloadSpec::settings): the module file
// (torch.jit.save), the per-sample input shape (the data source's), and the loss:
// "cross_entropy" on the module's logits or "module" (its forward(x, y) is the loss).
struct TorchScriptSpec {
  std::string model_file;
  std::vector<std::int64_t> input_shape;
  std::string loss = "cross_entropy";
};

// The TorchScript module of `file`, checked: a forward method taking x (loss
// "cross_entropy") or x and y ("module"); run once (without gradients, in eval mode) on
// two zero samples of `input_shape` and labels 0, its result is logits [2, >= classes] or
// a loss (a scalar, or a tuple whose first element is one). Throws std::invalid_argument
// with one line naming the file otherwise.
torch::jit::Module load_torchscript_model(const std::string& file, const std::vector<std::int64_t>& input_shape,
                                          const std::string& loss, std::int64_t classes);

// A TorchScript module behind ModuleWorkload's interface (it holds `module` itself: pass a
// clone to keep the original).
std::shared_ptr<TrainableModule> script_trainable(torch::jit::Module module);

// Rank `rank`'s torchscript workload: a clone of `module` on `data`.
std::unique_ptr<ModuleWorkload> make_torchscript_workload(const torch::jit::Module& module, const std::string& loss,
                                                          std::shared_ptr<const LabelledData> data,
                                                          std::int64_t batch_size, const std::string& partition,
                                                          std::uint64_t seed, int rank, int ranks);

}  // namespace dtsim::workloads
