// workloads::WorkloadSpec and make_workload: every workload a scenario can name, built
// for one rank. The dataset is loaded once per process (WorkloadData) and shared by all
// ranks of an emulated run.
#pragma once

#include <any>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/entry_settings.hpp"
#include "workloads/data_source.hpp"
#include "workloads/workload.hpp"

namespace dtsim::workloads {

struct WorkloadSpec {
  // "logistic_regression"; "mlp", "cnn" (Fashion-MNIST); shape-only models for
  // communication sweeps: "resnet20", "resnet50", "bert_base", "gpt2_small".
  std::string type = "logistic_regression";
  // The data set (data_source.hpp), for the types that train on one.
  DataSpec data;

  // Per rank, for the types that train in mini-batches of samples or sequences (the
  // image and shape-only models, torchscript, gpt; logistic regression's own settings
  // hold its own, which may be the full shard).
  std::int64_t batch_size = 32;
  std::string partition = "iid";  // "iid" or "by_label" (non-iid), for the image models

  // The type's own settings struct (its fields besides the shared ones above): its
  // entry's parse stores it, its to_json, loader, factory and footprint read it back with
  // settings_of<T> (LogisticRegressionSpec, TorchScriptSpec, ShapeModelSpec, GptSpec). A
  // default is written once, in that struct.
  std::any settings;

  // Where every tensor lives: parameters, gradients, the dataset or value pool (one copy
  // per process, shared by the ranks) and so whatever an algorithm allocates like them.
  // Random draws (data, initial parameters, mini-batch order) are made on the CPU and
  // copied, so a CUDA run starts from the same numbers as a CPU run. A scenario's
  // top-level "device" (runner/scenario.hpp); at::kCUDA means the current CUDA device.
  at::Device device = at::kCPU;
};

// The settings struct the type's parse stored in spec.settings (config/entry_settings.hpp).
template <class Settings>
const Settings& settings_of(const WorkloadSpec& spec) {
  return config::entry_settings<Settings>(spec.settings);
}

// The names make_workload knows, for error messages.
const std::vector<std::string>& workload_types();

// Whatever a workload type needs once per process (a dataset); may be null.
struct WorkloadData {
  virtual ~WorkloadData() = default;
};

// Loads the data `spec` needs; throws std::invalid_argument naming a missing or malformed
// file or an unknown type.
std::shared_ptr<const WorkloadData> load_workload_data(const WorkloadSpec& spec, std::uint64_t seed);

// Rank `rank`'s workload over `data` (from load_workload_data with the same spec and seed).
std::unique_ptr<Workload> make_workload(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data,
                                        std::uint64_t seed, int rank, int ranks);

}  // namespace dtsim::workloads
