// config::FieldRecorder: what a recording parse (config::ObjectReader with a recorder)
// learns about one JSON object: each field it reads, with the JSON type, default, bounds
// and allowed values the read checks, the fields the chosen entry names (only_fields),
// and its nested objects. The scenario schema is generated from these notes
// (runner/scenario_schema.hpp), so it states what the parse functions check.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::config {

class FieldRecorder;

struct FieldNote {
  std::string key;
  // "number", "integer", "boolean", "string", "object", or "" for a field found by hand
  // (ObjectReader::find / require), whose shape the section declares itself.
  std::string type;
  nlohmann::json fallback;  // the default; null when there is none
  bool required = false;
  std::optional<double> lo, hi;  // bounds as the read checks them (infinite ones left out)
  bool lo_open = false;
  std::vector<std::string> allowed;  // a choice's values
  // A choice whose default follows other fields (a data source that a file field selects,
  // a system field that starts from its preset's): the schema cannot say what its absence
  // means.
  bool fallback_derived = false;
  // A choice whose values own fields (data sources: each reads its own files): per value,
  // the fields of that family it reads. A value reads a family field only if listed, which
  // the schema can state even where a parse with that value stops before reading them (a
  // placeholder file it cannot open).
  std::map<std::string, std::vector<std::string>> fields_by_value;
};

class FieldRecorder {
 public:
  // A typed note replaces one found by hand; otherwise the first note of a key stays.
  void note(FieldNote n);
  // The recorder of the object at `key` (created on first use).
  FieldRecorder& nested(const std::string& key);
  // The fields the chosen entry names (ObjectReader::only_fields).
  void allow(std::vector<std::string> fields) { allowed_ = std::move(fields); }
  // The fields each value of the choice `key`, already noted, owns (FieldNote::fields_by_value).
  void own_fields(const std::string& key, std::map<std::string, std::vector<std::string>> by_value);

  const std::vector<FieldNote>& notes() const { return notes_; }
  const FieldNote* find(const std::string& key) const;
  const FieldRecorder* nested_at(const std::string& key) const;
  const std::optional<std::vector<std::string>>& allowed() const { return allowed_; }

 private:
  std::vector<FieldNote> notes_;
  std::map<std::string, std::unique_ptr<FieldRecorder>> nested_;
  std::optional<std::vector<std::string>> allowed_;
};

}  // namespace dtsim::config
