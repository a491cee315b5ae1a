// Data source "cifar10": CIFAR-10's binary files (workloads/cifar10.hpp's reader) from a
// directory the user names: 50,000 training and 10,000 test images of 3 x 32 x 32, 10
// classes, normalised per channel; training batches augmented with the paper's random
// crop (4-pixel padding) and horizontal flip unless "augment": false.
#include <fmt/format.h>

#include "workloads/cifar10.hpp"
#include "workloads/data_source.hpp"
#include "workloads/sources/cifar10.hpp"

namespace dtsim::workloads {

namespace {

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  Cifar10Settings set;
  set.files = parse_image_files(w, ctx, set.files.data_dir);
  set.augment = w.boolean("augment", set.augment);
  spec.settings = set;
}

void to_json(const DataSpec& spec, nlohmann::json& out) {
  const auto& set = data_settings<Cifar10Settings>(spec);
  image_files_json(set.files, out);
  out["augment"] = set.augment;
}

DataShape shape(const DataSpec& spec) {
  const auto& set = data_settings<Cifar10Settings>(spec);
  constexpr std::int64_t kTrain = 50000, kTest = 10000;
  const auto train = set.files.train_samples > 0 ? std::min(set.files.train_samples, kTrain) : kTrain;
  const auto test = set.files.test_samples > 0 ? std::min(set.files.test_samples, kTest) : kTest;
  // Every training file's bytes while they are converted (the reader holds them whole).
  return {.train = train, .test = test, .sample = {3, 32, 32}, .classes = 10,
          .file_bytes = static_cast<double>(kTrain + kTest) * Cifar10::kRecordBytes};
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t) {
  const auto& set = data_settings<Cifar10Settings>(spec);
  auto data = std::make_shared<LabelledData>(*Cifar10::load(set.files.data_dir, set.files.train_samples, set.files.test_samples));
  data->augment = set.augment;
  return data;
}

}  // namespace

const DataSourceEntry& cifar10_source() {
  static const DataSourceEntry entry{
      .name = "cifar10",
      .yields = SampleKind::labelled_samples,
      .description = "CIFAR-10 binary files (3 x 32 x 32 images, 10 classes), random crop and flip while training",
      .fields = {"data_dir", "train_samples", "test_samples", "augment"},
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
