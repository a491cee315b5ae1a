// The /algorithm section, its lr_schedule (and lr_scaleup) and the optimizer objects of diloco, streaming_diloco and sparseloco: one line per field for the generated scenario schema (config/field_doc.hpp;
// runner/scenario_schema.hpp). Types, defaults, bounds and choices come from the parse
// functions; a field's description, and its schema where the parse reads it by hand,
// live here.
#pragma once

#include <span>

#include "config/field_doc.hpp"

namespace dtsim::algorithms {

std::span<const config::FieldDoc> algorithm_docs();

}  // namespace dtsim::algorithms
