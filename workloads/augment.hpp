// The training-batch augmentation of the CIFAR-10 experiments (He et al. 2016, and the
// ChocoSGD reference's data loader): each image is padded by 4 zero pixels on every side,
// a random H x W window of the padded image is kept, and it is flipped left-right with
// probability 1/2. Draws come from the rank's CPU generator (the [B, 2] offsets, then the
// [B] flips), so a run is reproducible and CPU and GPU runs see
// the same crops.
#pragma once

#include <ATen/ATen.h>

namespace dtsim::workloads {

inline constexpr std::int64_t kAugmentPadding = 4;

// x: [B, C, H, W]; returns a new tensor of the same shape and device.
at::Tensor augment_batch(const at::Tensor& x, at::Generator& gen);

}  // namespace dtsim::workloads
