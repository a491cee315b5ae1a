// Data source "tensors"'s settings (sources/tensors.cpp): its file (tensors_file) and what
// the parse read of it.
#pragma once

#include "workloads/data_source.hpp"

namespace dtsim::workloads {

struct TensorsSettings : SourceFile {};

}  // namespace dtsim::workloads
