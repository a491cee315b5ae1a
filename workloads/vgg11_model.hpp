// VGG-11 with BatchNorm for 32 x 32 images as a torch::nn module, trained under autograd by
// ModuleWorkload (module_workload.hpp): the workload type "vgg11_real", the CHOCO-SGD
// reference's vgg11_bn (its pcode/models/vgg.py, architecture "A" with BatchNorm).
//
//   features: conv3x3 C->64, bn, relu, maxpool2; conv 128, bn, relu, maxpool2; conv 256, bn,
//   relu, conv 256, bn, relu, maxpool2; conv 512, bn, relu, conv 512, bn, relu, maxpool2;
//   conv 512, bn, relu, conv 512, bn, relu, maxpool2 (32 -> 1 pixel);
//   classifier: dropout 0.5, fc 512 -> 512, relu, dropout 0.5, fc 512 -> 512, relu,
//   fc 512 -> classes.
//
// The reference's classifier is 512 wide (not torchvision's 4096: these are CIFAR images,
// 512 features after the last pool). Convolutions have biases. Parameters keep the
// reference's nn.Sequential names ("features.0.weight", "features.1.weight" (BatchNorm),
// ..., "classifier.6.bias"), 38 tensors; with 3 channels and 10 classes 9,756,426
// parameters (see tests/vgg11_real_test.cpp for the closed form).
//
// Initialisation, from the seed on the CPU and so identical on every rank: convolution
// weights N(0, 2 / (k * k * out)) (the reference's), conv biases and the fc layers as
// PyTorch's defaults (U(-1/sqrt(fan_in), 1/sqrt(fan_in))), BatchNorm 1 and 0.
//
// Dropout draws its masks from a generator of the rank's own, seeded by (seed, rank), so
// runs repeat (torch's default generator is process-wide and not the scenario's); eval mode
// turns it off.
//
// Cost table: shape_models.hpp's vgg11_layers(C, classes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "workloads/labelled_data.hpp"
#include "workloads/module_workload.hpp"

namespace dtsim::workloads {

// The module for `in_channels` x 32 x 32 images in `classes` classes, initialised from
// `seed`, its dropout seeded by (seed, rank), with its cost table.
ModuleModel make_vgg11_model(std::int64_t in_channels, std::int64_t classes, std::uint64_t seed, int rank = 0);

// Rank `rank`'s vgg11_real workload on `data` (C x 32 x 32 images; throws
// std::invalid_argument otherwise).
std::unique_ptr<ModuleWorkload> make_vgg11_workload(std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                                                    const std::string& partition, std::uint64_t seed, int rank,
                                                    int ranks);

}  // namespace dtsim::workloads
