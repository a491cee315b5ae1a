// Data source "tokens"'s settings (sources/tokens.cpp): its file (tokens_file) and what
// the parse read of it.
#pragma once

#include "workloads/data_source.hpp"

namespace dtsim::workloads {

struct TokensSettings : SourceFile {};

}  // namespace dtsim::workloads
