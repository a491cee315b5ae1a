// Data source "fashion_mnist": Fashion-MNIST's IDX files (workloads/fashion_mnist.hpp's
// reader), from Debian's dataset-fashion-mnist by default: 60,000 training and 10,000
// test images of 1 x 28 x 28, 10 classes, normalised with the training set's mean and
// standard deviation.
#include <stdexcept>

#include <fmt/format.h>

#include "workloads/data_source.hpp"
#include "workloads/fashion_mnist.hpp"
#include "workloads/sources/fashion_mnist.hpp"

namespace dtsim::workloads {

namespace {

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  FashionMnistSettings set;
  set.files = parse_image_files(w, ctx, set.files.data_dir);
  set.image_size = w.integer("image_size", set.image_size, 28, 32);
  if (set.image_size != 28 && set.image_size != 32)
    throw config::ScenarioError(w.where("image_size"), config::ErrorKind::out_of_range,
                                fmt::format("expected 28 (as stored) or 32 (padded), got {}", set.image_size));
  spec.settings = set;
}

void to_json(const DataSpec& spec, nlohmann::json& out) {
  const auto& set = data_settings<FashionMnistSettings>(spec);
  image_files_json(set.files, out);
  out["image_size"] = set.image_size;
}

DataShape shape(const DataSpec& spec) {
  const auto& set = data_settings<FashionMnistSettings>(spec);
  constexpr std::int64_t kTrain = 60000, kTest = 10000;
  const auto train = set.files.train_samples > 0 ? std::min(set.files.train_samples, kTrain) : kTrain;
  const auto test = set.files.test_samples > 0 ? std::min(set.files.test_samples, kTest) : kTest;
  // The training images' bytes while they are converted to fp32.
  return {.train = train, .test = test, .sample = {1, set.image_size, set.image_size}, .classes = 10, .file_bytes = static_cast<double>(train) * 784};
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t) {
  const auto& set = data_settings<FashionMnistSettings>(spec);
  auto data = FashionMnist::load(set.files.data_dir, set.files.train_samples, set.files.test_samples);
  if (set.image_size == 28) return data;
  // Padded as torchvision's Pad(2) before Normalize: with the normalised value of a black pixel.
  const double background = (0.0 - FashionMnist::kMean) / FashionMnist::kStd;
  auto padded = std::make_shared<LabelledData>(*data);
  padded->train_x = at::constant_pad_nd(data->train_x, {2, 2, 2, 2}, background);
  padded->test_x = at::constant_pad_nd(data->test_x, {2, 2, 2, 2}, background);
  return padded;
}

void fit_image_side(const config::ObjectReader& w, DataSpec& spec, std::int64_t side, std::string_view who) {
  if (side != 28 && side != 32)  // the images are stored at 28 and padded to 32 only
    throw std::logic_error(fmt::format("fashion_mnist: {} asks for {} x {} images; the source has 28 or 32", who, side, side));
  auto set = data_settings<FashionMnistSettings>(spec);
  if (!w.value().contains("image_size")) set.image_size = side;
  if (set.image_size != side)
    throw config::ScenarioError(w.where("image_size"), config::ErrorKind::inconsistent,
                                fmt::format("expected {} for {} (a {} x {} model), got {}", side, who, side, side,
                                            set.image_size));
  spec.settings = set;
}

}  // namespace

const DataSourceEntry& fashion_mnist_source() {
  static const DataSourceEntry entry{
      .name = "fashion_mnist",
      .yields = SampleKind::labelled_samples,
      .description = "Fashion-MNIST IDX files (1 x 28 x 28 images, or padded to 32 x 32; 10 classes; Debian's "
                     "dataset-fashion-mnist)",
      .fields = {"data_dir", "train_samples", "test_samples", "image_size"},
      .selected_by = "",
      .path_fields = {"data_dir"},
      .data_path = "/workload/data_dir",
      .parse = parse,
      .to_json = to_json,
      .shape = shape,
      .load = load,
      .fit_image_side = fit_image_side};
  return entry;
}

}  // namespace dtsim::workloads
