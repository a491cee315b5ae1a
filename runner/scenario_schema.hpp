// The scenario JSON Schema, generated from the parse functions: `dtsim schema` prints it,
// scenarios/scenario.schema.json holds a copy for editors (tests/registry_test.cpp checks
// that the copy is current), and the loader checks every scenario against it
// (runner/schema.hpp).
//
// Each section's parse runs in recording mode (config/field_recorder.hpp) once per entry
// of its registry (the algorithm, workload type, compressor kind, ... that its selector
// field names) and once more per value of each choice the entry reads, so the fields an
// entry allows, their types, defaults, bounds and choices, which fields are required and
// which a choice's value turns off all come from the entries themselves. Descriptions,
// and the shape of a field the parse reads by hand, come from each folder's docs table
// (config/field_doc.hpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::config {
class FieldRecorder;
}

namespace dtsim::runner {

struct GeneratedSchema {
  nlohmann::json schema;
  // What the generator could not state, as "section/field: why" (a field read by hand
  // with no declared schema, a docs line for a field no entry reads); empty when complete.
  std::vector<std::string> problems;
};

// Generated once, on first use.
const GeneratedSchema& generated_scenario_schema();

// The schema as `dtsim schema` prints it (and scenarios/scenario.schema.json holds it).
std::string scenario_schema_text();

// The top-level fields' parse (runner/scenario.cpp) in recording mode.
void record_scenario_fields(const nlohmann::json& doc, config::FieldRecorder& recorder);

}  // namespace dtsim::runner
