// The registry-entry pieces (workload_registry.hpp) that the built-in 32 x 32 autograd models
// (resnet20_real, vgg11_real) share: both read batch_size and partition, train on cifar10
// (default), fashion_mnist padded to 32 x 32 (image_size 32, their default; 28 is refused) or
// a tensors file of C x 32 x 32 images, hold the dataset once per process, and estimate their
// memory from their cost table. Error messages name the scenario's type. A model's file
// states what is its own (an Image32Model) and takes its entry from image32_entry().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "workloads/labelled_data.hpp"
#include "workloads/shape_models.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::workloads {

class ModuleWorkload;

// What a built-in 32 x 32 model brings to its registry entry.
struct Image32Model {
  const char* name;
  const char* description;  // one line
  std::unique_ptr<ModuleWorkload> (*make_workload)(std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                                                   const std::string& partition, std::uint64_t seed, int rank,
                                                   int ranks);
  // Its cost table for the data's channels and classes.
  std::vector<ShapeLayer> (*layers)(std::int64_t in_channels, std::int64_t classes);
  double widest;  // the largest activation of one sample, in elements
};

struct Image32Data : WorkloadData {
  std::shared_ptr<const LabelledData> dataset;
};

// The scenario's data set (load_data_source), copied once to its device.
std::shared_ptr<const LabelledData> load_image_dataset(const WorkloadSpec& spec, std::uint64_t seed);

void parse_image32(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext& ctx);
void image32_json(const WorkloadSpec& spec, nlohmann::json& out);
std::shared_ptr<const WorkloadData> load_image32(const WorkloadSpec& spec, std::uint64_t seed);
// The channels C of `data`'s C x 32 x 32 images; throws std::invalid_argument naming
// `type` for samples of another shape.
std::int64_t image32_channels(const LabelledData& data, const char* type);
std::unique_ptr<Workload> make_image32_workload(const Image32Model& model, const WorkloadSpec& spec,
                                                std::shared_ptr<const WorkloadData> data, std::uint64_t seed, int rank,
                                                int ranks);
WorkloadFootprint image32_footprint(const Image32Model& model, const WorkloadSpec& spec, int ranks);
// Every field of the entry but make and footprint, which are the caller's.
WorkloadEntry image32_entry_fields(const Image32Model& model);

// The registry entry of `model`, a namespace-scope constant: the entry's functions are
// plain function pointers, so each model gets functions of its own.
template <const Image32Model& model>
const WorkloadEntry& image32_entry() {
  static const WorkloadEntry entry = [] {
    WorkloadEntry e = image32_entry_fields(model);
    e.make = [](const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data, std::uint64_t seed, int rank,
                int ranks) { return make_image32_workload(model, spec, std::move(data), seed, rank, ranks); };
    e.footprint = [](const WorkloadSpec& spec, int ranks) { return image32_footprint(model, spec, ranks); };
    return e;
  }();
  return entry;
}

}  // namespace dtsim::workloads
