// A sweep: one base scenario and axes of values, expanded into points, each a complete
// scenario parsed up front by runner::parse_scenario.
//
// Sweep file (JSON object; unknown keys are errors):
//   "name"        string, default the file's stem: label in tables and figures
//   "base"        a scenario file path (relative to the sweep file) or an inline scenario
//   "mode"        "product" (cartesian, first axis outermost; default) or "zip" (i-th
//                 value of every axis together; all axes the same length)
//   "axes"        non-empty array of {"path", "values", "name"?, "labels"?}:
//                   path    a JSON Pointer into the scenario ("/algorithm/lr", "/topology")
//                   values  a non-empty array of JSON values put at that path
//                   name    the column header (default: the path's last token)
//                   labels  one string per value, shown instead of the value (use it for
//                           object values such as whole topologies)
//   "target_loss" number, optional: the loss whose first crossing the tables report
//   "target_accuracy" number in (0, 1], optional: the test accuracy (a fraction) whose
//                 first crossing at an evaluation the tables report, with its step
//   "description" string, optional, ignored
//
// A point's scenario is the base document as written with each axis value put at its
// path (missing intermediate objects are created). A base given as a file gets what
// load_scenario does to a file: relative /workload/libsvm_file and data_dir are relative
// to its directory, and /network/calibrated fills in the network fields. An axis path is valid when it names
// a value of the base scenario's resolved form (Scenario::to_json(), every default
// filled in) or a field the loader accepts in every point; otherwise the sweep fails with
// "axis P: unknown path". Every error is one line naming the axis (or the sweep file's
// JSON path, "sweep: /axes/0: ..."); documents nested deeper than config::kMaxJsonDepth
// are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/json_input.hpp"
#include "runner/scenario.hpp"
#include "sweep/targets.hpp"

namespace dtsim::sweep {

// A malformed sweep file or flag: bad input (exit 2). One line: control characters in
// the message (from keys, values, labels) are escaped.
class SweepError : public config::InputError {
 public:
  using config::InputError::InputError;
};

struct Axis {
  std::string path;                   // JSON Pointer into the scenario
  std::string name;                   // column header
  std::vector<nlohmann::json> values;
  std::vector<std::string> labels;    // one per value
};

struct Point {
  std::size_t index = 0;              // position in expansion order
  std::string id;                     // stable file name: labels slug + hash of the resolved scenario
  std::string label;                  // "lr=0.1, topology=ring"
  std::vector<std::size_t> value_of;  // per axis: the index of its value
  nlohmann::json document;            // the scenario as parsed
  runner::Scenario scenario;
};

struct Sweep {
  std::string name;
  std::string mode = "product";
  Targets targets;
  std::vector<Axis> axes;
  std::vector<Point> points;

  // What a sweep output directory records in sweep.json: name, mode, targets, axes
  // and every point's id, label and axis values (no scenarios, no results).
  nlohmann::json manifest() const;
};

// `dir` resolves a relative "base" path and relative data files.
Sweep parse_sweep(const nlohmann::json& doc, const std::filesystem::path& dir, const std::string& default_name = "sweep");
Sweep load_sweep(const std::filesystem::path& file);

// A JSON value as it appears in labels and errors: numbers in shortest form (5e9, 0.001),
// strings bare, anything else as compact JSON.
std::string format_value(const nlohmann::json& value);

// The tokens of a JSON Pointer ("/a/b~1c" -> a, b/c); throws SweepError on a string that
// is not one.
std::vector<std::string> pointer_tokens(const std::string& pointer);

// FNV-1a 64-bit hash of a string, as 16 hex digits.
std::string hash_hex(const std::string& text);

}  // namespace dtsim::sweep
