// workloads::WorkloadSpec and make_workload: every workload a scenario can name, built
// for one rank. The dataset is loaded once per process (WorkloadData) and shared by all
// ranks of an emulated run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/data_source.hpp"
#include "workloads/gpt_spec.hpp"
#include "workloads/logistic_regression.hpp"
#include "workloads/workload.hpp"

namespace dtsim::workloads {

struct WorkloadSpec {
  // "logistic_regression"; "mlp", "cnn" (Fashion-MNIST); shape-only models for
  // communication sweeps: "resnet20", "resnet50", "bert_base", "gpt2_small".
  std::string type = "logistic_regression";
  LogisticRegressionSpec logistic;  // type "logistic_regression"
  // The data set (data_source.hpp), for the types that train on one.
  DataSpec data;

  // Image models (mlp, cnn).
  std::int64_t batch_size = 32;       // per rank (also the shape-only models' batch)
  std::string partition = "iid";      // "iid" or "by_label" (non-iid)

  // torchscript: the module file (torch.jit.save), the per-sample input shape (the data
  // source's), and the loss: "cross_entropy" on the module's logits or "module" (its
  // forward(x, y) is the loss).
  struct TorchScriptSpec {
    std::string model_file;
    std::vector<std::int64_t> input_shape;
    std::string loss = "cross_entropy";
  } script;

  // Shape-only models: per-rank batch (images, or sequences for the transformers) and
  // sequence length, which set the per-layer FLOPs of the cost model.
  std::int64_t sequence_length = 128;

  GptSpec gpt;  // gpt (gpt_model.hpp): sizes and evaluation windows; its batch is batch_size

  // Where every tensor lives: parameters, gradients, the dataset or value pool (one copy
  // per process, shared by the ranks) and so whatever an algorithm allocates like them.
  // Random draws (data, initial parameters, mini-batch order) are made on the CPU and
  // copied, so a CUDA run starts from the same numbers as a CPU run. A scenario's
  // top-level "device" (runner/scenario.hpp); at::kCUDA means the current CUDA device.
  at::Device device = at::kCPU;
};

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
