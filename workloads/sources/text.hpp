// Data source "text"'s settings (sources/text.cpp).
#pragma once

#include <string>

#include "workloads/data_source.hpp"
#include "workloads/text_data.hpp"

namespace dtsim::workloads {

struct TextSettings {
  std::string text_path = kFortunesPath;
  double holdout = 0.1;  // fraction of every file held out
  DataShape read;        // the corpus's byte positions, counted at parse
};

}  // namespace dtsim::workloads
