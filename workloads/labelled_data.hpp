// workloads::LabelledData: what every data source gives a workload, whatever the file
// format it read or the generator it ran: samples with class labels, a training split
// and, where the source has one, a test split.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace dtsim::workloads {

struct LabelledData {
  at::Tensor train_x;  // [N, ...] fp32: {features} vectors or {C, H, W} images
  at::Tensor train_y;  // [N] int64 labels in 0 .. classes - 1
  at::Tensor test_x;   // undefined when the source has no test split
  at::Tensor test_y;
  std::int64_t classes = 0;
  // Training batches are augmented (augment.hpp: the random crop with 4-pixel padding and
  // horizontal flip of the CIFAR-10 experiments).
  bool augment = false;

  bool has_test() const { return test_x.defined(); }
};

}  // namespace dtsim::workloads
