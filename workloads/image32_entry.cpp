#include "workloads/image32_entry.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workloads/module_workload.hpp"

namespace dtsim::workloads {

// Only 32 x 32 images: the networks' strides and cost tables assume them. A source that can
// make its images that size does so (Fashion-MNIST pads to 32 unless the scenario asks
// for 28, which is refused: DataSourceEntry::fit_image_side).
void parse_image32(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext&) {
  spec.batch_size = w.integer("batch_size", spec.batch_size, 1, config::kIntMax);
  spec.partition = w.choice("partition", "iid", {"iid", "by_label"});
  auto& data = spec.data;
  if (const auto fit = data_source_entry(data.source).fit_image_side) fit(w, data, 32, spec.type);
  const auto sample = data_source_entry(data.source).shape(data).sample;
  if (sample.size() != 3 || sample[1] != 32 || sample[2] != 32)
    throw config::ScenarioError(w.where(data.source == "tensors" ? "tensors_file" : "data"),
                                config::ErrorKind::inconsistent,
                                fmt::format("expected C x 32 x 32 images for {}, the data has samples of {}", spec.type,
                                            fmt::join(sample, " x ")));
}

void image32_json(const WorkloadSpec& spec, nlohmann::json& out) {
  out["batch_size"] = spec.batch_size;
  out["partition"] = spec.partition;
}

std::shared_ptr<const LabelledData> load_image_dataset(const WorkloadSpec& spec, std::uint64_t seed) {
  return on_device(load_data_source(workload_data(spec), seed), spec.device,
                   [](const LabelledData& from, LabelledData& to, at::Device device) {
                     to = from;
                     to.train_x = from.train_x.to(device);
                     to.train_y = from.train_y.to(device);
                     to.test_x = from.test_x.defined() ? from.test_x.to(device) : at::Tensor();
                     to.test_y = from.test_y.defined() ? from.test_y.to(device) : at::Tensor();
                   });
}

std::shared_ptr<const WorkloadData> load_image32(const WorkloadSpec& spec, std::uint64_t seed) {
  auto data = std::make_shared<Image32Data>();
  data->dataset = load_image_dataset(spec, seed);
  return data;
}

std::int64_t image32_channels(const LabelledData& data, const char* type) {
  const auto sizes = data.train_x.sizes();
  if (sizes.size() != 4 || sizes[2] != 32 || sizes[3] != 32)
    throw std::invalid_argument(
        fmt::format("{}: expected C x 32 x 32 images, got samples of {}", type, fmt::join(sizes.slice(1), " x ")));
  return sizes[1];
}

std::unique_ptr<Workload> make_image32_workload(const Image32Model& model, const WorkloadSpec& spec,
                                                std::shared_ptr<const WorkloadData> data, std::uint64_t seed, int rank,
                                                int ranks) {
  return model.make_workload(data_for<Image32Data>(data, spec.type).dataset, spec.batch_size, spec.partition, seed,
                             rank, ranks);
}

WorkloadFootprint image32_footprint(const Image32Model& model, const WorkloadSpec& spec, int ranks) {
  constexpr double kFloat = 4;
  const auto d = [](auto x) { return static_cast<double>(x); };
  const auto data = workload_data(spec);
  const auto shape = data_source_entry(data.source).shape(data);
  const auto layers = model.layers(shape.sample.at(0), shape.classes);
  WorkloadFootprint w;
  // Activations per sample: a layer's bytes are its fp32 input and output, so bytes / 8
  // is about the elements it writes.
  double activations = d(shape.sample_elements());
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    activations += it->bytes / 8;
    for (auto t = it->tensors.rbegin(); t != it->tensors.rend(); ++t) {
      w.sizes_backward.push_back(t->numel());  // autograd's ready order has the same sizes
      w.elements += d(t->numel());
    }
  }
  const double train = d(shape.train), test = d(shape.test);
  // fp32 images and int64 labels, the files' bytes while they are converted, and the
  // evaluation's chunk of 2,000 images (a few of the widest activations at a time).
  w.data_bytes =
      (train + test) * (d(shape.sample_elements()) * kFloat + 8) + shape.file_bytes + 2000 * 4 * model.widest * kFloat;
  const double shard = std::ceil(train / std::max(1, ranks)), batch = std::min(d(spec.batch_size), shard);
  // Shard indices; what autograd saves for a batch and its gradients (about twice the
  // activations); the module's own parameters and .grad besides the algorithm's.
  w.per_rank_bytes = 2 * shard * 8 + batch * activations * 2 * kFloat + 2 * w.elements * kFloat;
  return w;
}

WorkloadEntry image32_entry_fields(const Image32Model& model) {
  const auto sources = sources_yielding(SampleKind::labelled_samples, "cifar10");
  return {.name = model.name,
          .description = model.description,
          .fields = with_data_fields({"batch_size", "partition"}, sources),
          .data_sources = sources,
          .parse = parse_image32,
          .to_json = image32_json,
          .load_data = load_image32};
}

}  // namespace dtsim::workloads
