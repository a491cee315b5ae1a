// Data source "libsvm"'s settings (sources/libsvm.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace dtsim::workloads {

struct LibsvmSettings {
  std::string libsvm_file;
  // The file's line count and its largest feature index (or the scenario's features),
  // both read at parse.
  std::int64_t samples = 0;
  std::int64_t features = 0;
};

}  // namespace dtsim::workloads
