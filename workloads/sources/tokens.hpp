// Data source "tokens"'s settings (sources/tokens.cpp).
#pragma once

#include <string>

#include "workloads/data_source.hpp"


namespace dtsim::workloads {

struct TokensSettings {
  std::string tokens_file;
  DataShape read;  // the file's rows, window length and vocabulary, read at parse
};

}  // namespace dtsim::workloads
