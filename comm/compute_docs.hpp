// The /compute section: one line per field for the generated scenario schema (config/field_doc.hpp;
// runner/scenario_schema.hpp). Types, defaults, bounds and choices come from the parse
// functions; a field's description, and its schema where the parse reads it by hand,
// live here.
#pragma once

#include <span>

#include "config/field_doc.hpp"

namespace dtsim::comm {

std::span<const config::FieldDoc> compute_docs();

}  // namespace dtsim::comm
