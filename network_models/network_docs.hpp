// The /topology and /network sections, an edges topology's cables and the nccl model's system object: one line per field for the generated scenario schema (config/field_doc.hpp;
// runner/scenario_schema.hpp). Types, defaults, bounds and choices come from the parse
// functions; a field's description, and its schema where the parse reads it by hand,
// live here.
#pragma once

#include <span>

#include "config/field_doc.hpp"

namespace dtsim::net {

std::span<const config::FieldDoc> network_docs();

}  // namespace dtsim::net
