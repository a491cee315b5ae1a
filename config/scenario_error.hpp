// config::ScenarioError: a user's mistake in a scenario (or another input file), with the
// JSON Pointer of the value at fault and the kind of mistake.
//
// The message is one line ("PATH: what was expected, got what"); control characters in
// the path or message are escaped. Callers that act on an error (the sweep, which must
// tell an axis that names no field from a value that is out of range) read kind(), never
// the text. dtsim exits with status 2 for a ScenarioError or an InputError (bad input);
// an internal precondition that fails throws std::logic_error (std::invalid_argument
// included) and exits with status 1 as a bug in dtsim.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "config/json_input.hpp"

namespace dtsim::config {

enum class ErrorKind {
  syntax,         // not JSON, or nested too deeply
  missing_field,  // a required field is absent
  unknown_field,  // a key the section (or the chosen algorithm, workload, compressor) does not read
  wrong_type,     // a string where a number belongs, ...
  out_of_range,   // a number outside its bounds
  unknown_name,   // a string that is none of the names a registry knows
  inconsistent,   // fields that contradict each other, or the rest of the scenario
  bad_file,       // a file the scenario names is missing, not a regular file, or malformed
  too_large,      // more memory (or a larger topology) than this machine has
  environment,    // the machine or launcher does not provide what the scenario asks for
};

std::string_view to_string(ErrorKind kind);

class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(const std::string& path, ErrorKind kind, const std::string& message)
      : std::runtime_error(one_line(path + ": " + message)), path_(path), kind_(kind) {}
  const std::string& path() const { return path_; }
  ErrorKind kind() const { return kind_; }

 private:
  std::string path_;
  ErrorKind kind_;
};

// A user's mistake outside a scenario's fields: a command-line flag, an environment
// variable, a file dtsim reads (a recorded trace, a network model file, a sweep file).
// One line naming the flag, variable or file; dtsim exits with status 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(one_line(message)) {}
};

}  // namespace dtsim::config
