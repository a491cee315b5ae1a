#include "config/field_recorder.hpp"

#include <algorithm>

namespace dtsim::config {

void FieldRecorder::note(FieldNote n) {
  const auto it = std::find_if(notes_.begin(), notes_.end(), [&](const FieldNote& old) { return old.key == n.key; });
  if (it == notes_.end()) notes_.push_back(std::move(n));
  else if (it->type.empty() && !n.type.empty()) *it = std::move(n);
  else if (it->type.empty()) it->required = it->required || n.required;
}

void FieldRecorder::own_fields(const std::string& key, std::map<std::string, std::vector<std::string>> by_value) {
  const auto it = std::find_if(notes_.begin(), notes_.end(), [&](const FieldNote& n) { return n.key == key; });
  if (it != notes_.end()) it->fields_by_value = std::move(by_value);
}

FieldRecorder& FieldRecorder::nested(const std::string& key) {
  auto& slot = nested_[key];
  if (!slot) slot = std::make_unique<FieldRecorder>();
  return *slot;
}

const FieldNote* FieldRecorder::find(const std::string& key) const {
  const auto it = std::find_if(notes_.begin(), notes_.end(), [&](const FieldNote& n) { return n.key == key; });
  return it == notes_.end() ? nullptr : &*it;
}

const FieldRecorder* FieldRecorder::nested_at(const std::string& key) const {
  const auto it = nested_.find(key);
  return it == nested_.end() ? nullptr : it->second.get();
}

}  // namespace dtsim::config
