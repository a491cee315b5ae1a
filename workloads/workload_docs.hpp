// The /workload section: every workload type's and data source's fields: one line per field for the generated scenario schema (config/field_doc.hpp;
// runner/scenario_schema.hpp). Types, defaults, bounds and choices come from the parse
// functions; a field's description, and its schema where the parse reads it by hand,
// live here.
#pragma once

#include <span>

#include "config/field_doc.hpp"

namespace dtsim::workloads {

std::span<const config::FieldDoc> workload_docs();

}  // namespace dtsim::workloads
