// config::FieldDoc: one line of a scenario section's field reference, kept in the folder
// of the concept it describes (algorithms/algorithm_docs.cpp, workloads/workload_docs.cpp,
// ...). The schema generator (runner/scenario_schema.hpp) takes each field's type,
// default, bounds and choices from the parse functions themselves and only its
// description from here, plus a declared schema where the recording cannot see one.
#pragma once

#include <string_view>

namespace dtsim::config {

struct FieldDoc {
  // The schema's $defs name ("scenario" for the document's root; "network.algorithms"
  // for an object nested in a section).
  std::string_view section;
  std::string_view field;        // "" for the section itself
  std::string_view description;  // one line
  // JSON Schema text. For a field: its shape where the parse reads it by hand (an array,
  // a string or an integer), which stands instead of what the recording saw. For a
  // section: {"allOf": [...]} with the cross-field rules its parse checks by hand, and
  // {"requiredUnless": KEY} when KEY (resolved before the parse) supplies its required
  // fields.
  std::string_view schema = {};
};

}  // namespace dtsim::config
