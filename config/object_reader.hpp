// config::ObjectReader: reads the fields of one JSON object of a user's file into typed
// values, each checked where it is read, and remembers which keys were read so that
// finish() can report an unknown key with its full path (a typo must not silently fall
// back to a default). Every failure is a ScenarioError naming the JSON Pointer.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/scenario_error.hpp"

namespace dtsim::config {

class FieldRecorder;  // config/field_recorder.hpp: what a recording parse notes down

// "type value" of a JSON value for messages ("string \"half\"", "number 2.5"), cut to 40 characters.
std::string describe(const nlohmann::json& v);

inline constexpr auto kIntMax = std::numeric_limits<std::int64_t>::max();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

class ObjectReader {
 public:
  // `path`: the object's JSON Pointer ("" for the document's root). With a `recorder`
  // the reader also notes every typed read (key, type, default, bounds, choices) there,
  // and a missing required field reads as a placeholder instead of failing, so that the
  // schema generator (runner/scenario_schema.hpp) learns a section's fields by parsing it.
  ObjectReader(const nlohmann::json& object, std::string path, FieldRecorder* recorder = nullptr);

  // The JSON Pointer of `key` in this object (of the object itself for "").
  std::string where(const std::string& key = "") const;
  const nlohmann::json& value() const { return object_; }
  // Set in a recording parse only; code that reads a field by hand declares it there.
  FieldRecorder* recorder() const { return recorder_; }

  // The value at `key`, or nullptr; either way `key` counts as read.
  const nlohmann::json* find(const std::string& key);
  const nlohmann::json& require(const std::string& key, const char* expected);

  // Without a fallback the field is required. Bounds are closed unless lo_open.
  double number(const std::string& key, std::optional<double> fallback, double lo, double hi, bool lo_open = false);
  // A number in [lo, hi), such as a decay rate in [0, 1) (the schema states [lo, hi]; the
  // open end is checked here).
  double number_below(const std::string& key, std::optional<double> fallback, double lo, double hi);
  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback, std::int64_t lo, std::int64_t hi);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, std::optional<std::string> fallback);
  // A string that must be one of `allowed` (ErrorKind::unknown_name otherwise). A
  // fallback the caller computed from other fields is `derived` (FieldNote::fallback_derived).
  enum class Fallback { fixed, derived };
  std::string choice(const std::string& key, std::optional<std::string> fallback, const std::vector<std::string>& allowed,
                     Fallback how = Fallback::fixed);
  ObjectReader object(const std::string& key, bool required);

  // Every key besides `except` must be one of `fields`, else "not a field of WHAT (its
  // fields: ...)" (ErrorKind::unknown_field): the chosen algorithm, workload type or
  // compressor kind names the fields it reads.
  void only_fields(std::span<const std::string> fields, std::span<const std::string> except, const std::string& what) const;

  // Unknown keys are errors.
  void finish() const;

 private:
  const nlohmann::json& object_;
  std::string path_;
  std::set<std::string> seen_;
  FieldRecorder* recorder_ = nullptr;
};

}  // namespace dtsim::config
