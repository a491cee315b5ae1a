// Data source "fashion_mnist"'s settings (sources/fashion_mnist.cpp).
#pragma once

#include <cstdint>

#include "workloads/data_source.hpp"

namespace dtsim::workloads {

struct FashionMnistSettings {
  ImageFiles files{.data_dir = "/usr/share/datasets/fashion-mnist"};  // Debian's dataset-fashion-mnist
  // 28 (as stored) or 32 (padded by 2 background pixels on every side, for the 32 x 32
  // models).
  std::int64_t image_size = 28;
};

}  // namespace dtsim::workloads
