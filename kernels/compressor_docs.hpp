// The compressor object (/algorithm/compressor) of every compressor kind: one line per
// field for the generated scenario schema (config/field_doc.hpp;
// runner/scenario_schema.hpp), gathered from the kinds' entries (their descriptions and
// their fields'). Types, defaults, bounds and choices come from the kinds' parse
// functions.
#pragma once

#include <span>

#include "config/field_doc.hpp"

namespace dtsim::kernels {

std::span<const config::FieldDoc> compressor_docs();

}  // namespace dtsim::kernels
