// A validator for the subset of JSON Schema (2020-12) that scenarios/scenario.schema.json
// uses, and the scenario schema (generated: runner/scenario_schema.hpp).
//
// Keywords: type (string or array; "integer" means a JSON integer, as the loader reads
// it), enum, const, properties, required, additionalProperties (boolean or schema),
// items, minItems, maxItems, minLength, minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf, allOf, anyOf, oneOf, not, if/then/else, $ref (local
// "#/..." pointers only), boolean schemas. Annotations ($schema, $id, $defs, title,
// description, default, examples, $comment) are ignored; any other keyword is an error
// in the schema, so a keyword this validator does not know is never silently skipped.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dtsim::runner {

// The first error of `doc` against `schema` as "path: message" (path a JSON Pointer into
// doc, "/" for the root), or nullopt when it validates. Throws std::invalid_argument for
// a schema that uses a keyword outside the subset or a $ref that does not resolve.
std::optional<std::string> validate_schema(const nlohmann::json& schema, const nlohmann::json& doc);

// The scenario schema, generated from the parse functions (scenarios/scenario.schema.json
// holds `dtsim schema`'s copy of it).
const nlohmann::json& scenario_schema();

// validate_schema(scenario_schema(), doc).
std::optional<std::string> validate_scenario_schema(const nlohmann::json& doc);

}  // namespace dtsim::runner
