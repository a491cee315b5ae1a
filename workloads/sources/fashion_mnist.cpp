// Data source "fashion_mnist": Fashion-MNIST's IDX files (workloads/fashion_mnist.hpp's
// reader), from Debian's dataset-fashion-mnist by default: 60,000 training and 10,000
// test images of 1 x 28 x 28, 10 classes, normalised with the training set's mean and
// standard deviation.
#include <fmt/format.h>

#include "workloads/data_source.hpp"
#include "workloads/fashion_mnist.hpp"

namespace dtsim::workloads {

namespace {

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  const std::string dir = w.string("data_dir", spec.data_dir);
  if (dir.empty())
    throw config::ScenarioError(w.where("data_dir"), config::ErrorKind::out_of_range, "expected a non-empty directory path");
  spec.data_dir = dir;
  spec.train_samples = w.integer("train_samples", 0, 0, config::kIntMax);
  spec.test_samples = w.integer("test_samples", 0, 0, config::kIntMax);
  if (spec.train_samples != 0 && spec.train_samples < ctx.ranks)
    throw config::ScenarioError(w.where("train_samples"), config::ErrorKind::inconsistent,
                                fmt::format("expected 0 (all) or at least one sample per rank ({}), got {}", ctx.ranks,
                                            spec.train_samples));
}

void to_json(const DataSpec& spec, nlohmann::json& out) {
  out["data_dir"] = spec.data_dir;
  out["train_samples"] = spec.train_samples;
  out["test_samples"] = spec.test_samples;
}

DataShape shape(const DataSpec& spec) {
  constexpr std::int64_t kTrain = 60000, kTest = 10000;
  const auto train = spec.train_samples > 0 ? std::min(spec.train_samples, kTrain) : kTrain;
  const auto test = spec.test_samples > 0 ? std::min(spec.test_samples, kTest) : kTest;
  // The training images' bytes while they are converted to fp32.
  return {.train = train, .test = test, .sample = {1, 28, 28}, .classes = 10, .file_bytes = static_cast<double>(train) * 784};
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t) {
  return FashionMnist::load(spec.data_dir, spec.train_samples, spec.test_samples);
}

}  // namespace

const DataSourceEntry& fashion_mnist_source() {
  static const DataSourceEntry entry{
      .name = "fashion_mnist",
      .description = "Fashion-MNIST IDX files (1 x 28 x 28 images, 10 classes; Debian's dataset-fashion-mnist)",
      .fields = {"data_dir", "train_samples", "test_samples"},
      .selected_by = "",
      .path_fields = {"data_dir"},
      .data_path = "/workload/data_dir",
      .parse = parse,
      .to_json = to_json,
      .shape = shape,
      .load = load};
  return entry;
}

}  // namespace dtsim::workloads
