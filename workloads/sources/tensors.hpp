// Data source "tensors"'s settings (sources/tensors.cpp).
#pragma once

#include <string>

#include "workloads/data_source.hpp"


namespace dtsim::workloads {

struct TensorsSettings {
  std::string tensors_file;
  DataShape read;  // the file's counts, sample shape and classes, read at parse
};

}  // namespace dtsim::workloads
