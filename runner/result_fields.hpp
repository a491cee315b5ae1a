// The result file (`<scenario>.result.json`, a sweep point's "result"), described field by
// field: the one description `dtsim list results` prints (docs/result_file.md is that
// output) and runs_test checks against what RunResult::to_json writes.
#pragma once

#include <span>
#include <string>

namespace dtsim::runner {

struct ResultField {
  // JSON Pointer of the field; "*" stands for every element of an array.
  const char* pointer;
  // JSON type(s): "number", "integer", "string", "boolean", "object", "array of numbers",
  // with "or null" where the field can be null.
  const char* type;
  const char* description;
};

// In file order.
std::span<const ResultField> result_fields();

// The description as a Markdown table.
std::string result_fields_markdown();

}  // namespace dtsim::runner
