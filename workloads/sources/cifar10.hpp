// Data source "cifar10"'s settings (sources/cifar10.cpp).
#pragma once

#include "workloads/data_source.hpp"

namespace dtsim::workloads {

struct Cifar10Settings {
  ImageFiles files;     // no default directory: CIFAR-10 is wherever the user put it
  bool augment = true;  // the training batches' random crop and flip (augment.hpp)
};

}  // namespace dtsim::workloads
