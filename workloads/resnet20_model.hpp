// ResNet-20 for 32 x 32 images (He et al. 2016, section 4.2, the CIFAR-10 network) as a
// torch::nn module, trained under autograd by ModuleWorkload (module_workload.hpp): the
// workload type "resnet20_real".
//
//   conv1 3x3 C->16, bn1, relu; three stages of three basic blocks (conv3x3 - bn - relu -
//   conv3x3 - bn, + shortcut, relu) of 16, 32 and 64 channels, stride 2 in the first block
//   of stages 2 and 3; global average pool; fc 64 -> classes.
//
// Shortcuts are option A (identity; where the shape changes, the input subsampled by 2
// and zero-padded with (out - in) / 2 channels on each side): no parameters, so the
// model has the shape model resnet20's 59 tensors and 269,722 parameters (C = 3, 10
// classes), under the same torchvision-style names ("conv1.weight", "bn1.weight",
// "layer1.0.conv1.weight", ..., "fc.bias"), in the same order. Convolutions have no bias.
//
// Initialisation, from the seed on the CPU and so identical on every rank: convolutions
// Kaiming-normal N(0, 2 / (k * k * out)) (fan-out, ReLU gain, as torchvision's ResNet and
// the ChocoSGD reference's), BatchNorm weight 1 and bias 0, the fc layer as PyTorch's
// nn.Linear default (weight and bias ~ U(-1/sqrt(64), 1/sqrt(64))).
//
// Cost table: shape_models.hpp's resnet20_layers(C, classes), the shape model's own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "workloads/labelled_data.hpp"
#include "workloads/module_workload.hpp"

namespace dtsim::workloads {

// The module for `in_channels` x 32 x 32 images in `classes` classes, initialised from
// `seed`, with its cost table.
ModuleModel make_resnet20_model(std::int64_t in_channels, std::int64_t classes, std::uint64_t seed);

// Rank `rank`'s resnet20_real workload on `data` (C x 32 x 32 images; throws
// std::invalid_argument otherwise).
std::unique_ptr<ModuleWorkload> make_resnet20_workload(std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                                                       const std::string& partition, std::uint64_t seed, int rank,
                                                       int ranks);

}  // namespace dtsim::workloads
