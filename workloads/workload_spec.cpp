#include "workloads/workload_spec.hpp"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workloads/fashion_mnist.hpp"
#include "workloads/image_models.hpp"
#include "workloads/shape_models.hpp"

namespace dtsim::workloads {

namespace {

struct LogisticData : WorkloadData {
  std::shared_ptr<const SyntheticDataset> dataset;
};

struct FashionMnistData : WorkloadData {
  std::shared_ptr<const FashionMnist> dataset;
};

struct ShapePoolData : WorkloadData {
  at::Tensor pool;
};

bool is_image_model(const std::string& type) { return type == "mlp" || type == "cnn"; }

std::invalid_argument unknown_type(const std::string& type) {
  return std::invalid_argument(
      fmt::format("/workload/type: unknown workload type '{}' (expected one of: {})", type, fmt::join(workload_types(), ", ")));
}

// The dataset on `device`: generated (or read) on the CPU, then copied once, so every
// device sees the same numbers.
std::shared_ptr<const SyntheticDataset> on_device(std::shared_ptr<const SyntheticDataset> data, at::Device device) {
  if (device.is_cpu()) return data;
  auto moved = std::make_shared<SyntheticDataset>();
  moved->x = data->x.to(device);
  moved->y = data->y.to(device);
  return moved;
}

std::shared_ptr<const FashionMnist> on_device(std::shared_ptr<const FashionMnist> data, at::Device device) {
  if (device.is_cpu()) return data;
  auto moved = std::make_shared<FashionMnist>();
  moved->train_x = data->train_x.to(device);
  moved->train_y = data->train_y.to(device);
  moved->test_x = data->test_x.to(device);
  moved->test_y = data->test_y.to(device);
  return moved;
}

template <class T>
const T& data_for(const std::shared_ptr<const WorkloadData>& data, const std::string& type) {
  const auto* d = dynamic_cast<const T*>(data.get());
  if (!d) throw std::invalid_argument(fmt::format("make_workload: data was not loaded for {}", type));
  return *d;
}

}  // namespace

const std::vector<std::string>& workload_types() {
  static const std::vector<std::string> types{"logistic_regression", "mlp", "cnn", "resnet20", "resnet50",
                                              "bert_base", "gpt2_small"};
  return types;
}

std::shared_ptr<const WorkloadData> load_workload_data(const WorkloadSpec& spec, std::uint64_t seed) {
  if (spec.device.is_cuda()) {
    // fp32 on the GPU means fp32: LibTorch lets cuDNN convolutions (and, before 1.12,
    // cuBLAS matmuls) round their inputs to TF32 (2^-11) by default, which would put the
    // CNN's GPU run a thousand times further from the CPU run than rounding order does.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  if (spec.type == "logistic_regression") {
    auto data = std::make_shared<LogisticData>();
    data->dataset = on_device(SyntheticDataset::generate(spec.logistic, seed), spec.device);
    return data;
  }
  if (is_image_model(spec.type)) {
    auto data = std::make_shared<FashionMnistData>();
    data->dataset = on_device(FashionMnist::load(spec.data_dir, spec.train_samples, spec.test_samples), spec.device);
    return data;
  }
  if (is_shape_model(spec.type)) {
    shape_model(spec.type, spec.sequence_length);  // validates the sequence length
    auto data = std::make_shared<ShapePoolData>();
    data->pool = make_shape_pool(seed).to(spec.device);
    return data;
  }
  throw unknown_type(spec.type);
}

std::unique_ptr<Workload> make_workload(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data,
                                        std::uint64_t seed, int rank, int ranks) {
  if (spec.type == "logistic_regression")
    return make_logistic_regression(spec.logistic, data_for<LogisticData>(data, spec.type).dataset, seed, rank, ranks);
  if (is_image_model(spec.type))
    return make_image_workload(spec.type, data_for<FashionMnistData>(data, spec.type).dataset, spec.batch_size,
                               spec.partition, seed, rank, ranks);
  if (is_shape_model(spec.type))
    return make_shape_workload(spec.type, spec.batch_size, spec.sequence_length,
                               data_for<ShapePoolData>(data, spec.type).pool, seed, rank);
  throw unknown_type(spec.type);
}

}  // namespace dtsim::workloads
