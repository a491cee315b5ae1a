// The registry-entry pieces (workload_registry.hpp) that the built-in 32 x 32 autograd models
// (resnet20_real, vgg11_real) share: both read batch_size and partition, train on cifar10
// (default), fashion_mnist padded to 32 x 32 (image_size 32, their default; 28 is refused) or
// a tensors file of C x 32 x 32 images, hold the dataset once per process, and estimate their
// memory from their cost table. Error messages name the scenario's type.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "workloads/labelled_data.hpp"
#include "workloads/shape_models.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::workloads {

struct Image32Data : WorkloadData {
  std::shared_ptr<const LabelledData> dataset;
};

// The scenario's data set (load_data_source), copied once to its device.
std::shared_ptr<const LabelledData> load_image_dataset(const WorkloadSpec& spec, std::uint64_t seed);

void parse_image32(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext& ctx);
void image32_json(const WorkloadSpec& spec, nlohmann::json& out);
std::shared_ptr<const WorkloadData> load_image32(const WorkloadSpec& spec, std::uint64_t seed);
// `layers`: the model's cost table for the data's channels and classes; `widest`: the
// largest activation of one sample, in elements.
WorkloadFootprint image32_footprint(const WorkloadSpec& spec, int ranks, const std::vector<ShapeLayer>& layers,
                                    double widest);

}  // namespace dtsim::workloads
