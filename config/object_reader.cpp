#include "config/object_reader.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/closest_name.hpp"
#include "config/field_recorder.hpp"

namespace dtsim::config {

using nlohmann::json;

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::syntax: return "syntax";
    case ErrorKind::missing_field: return "missing_field";
    case ErrorKind::unknown_field: return "unknown_field";
    case ErrorKind::wrong_type: return "wrong_type";
    case ErrorKind::out_of_range: return "out_of_range";
    case ErrorKind::unknown_name: return "unknown_name";
    case ErrorKind::inconsistent: return "inconsistent";
    case ErrorKind::bad_file: return "bad_file";
    case ErrorKind::too_large: return "too_large";
    case ErrorKind::environment: return "environment";
  }
  return "?";
}

std::string describe(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  const char* type = v.is_string() ? "string" : v.is_boolean() ? "boolean" : v.is_number() ? "number"
                   : v.is_object() ? "object" : v.is_array() ? "array" : "null";
  return fmt::format("{} {}", type, text);
}

namespace {

// A recorded read's bounds, infinite ones left out.
void set_bounds(FieldNote& n, double lo, double hi, bool lo_open) {
  if (std::isfinite(lo)) n.lo = lo;
  if (std::isfinite(hi)) n.hi = hi;
  n.lo_open = lo_open;
}

// What a recording parse reads for a missing required number: one inside the bounds.
double placeholder(double lo, double hi, bool lo_open) {
  if (!std::isfinite(lo)) return std::isfinite(hi) ? std::min(hi, 0.0) : 0.0;
  if (!lo_open) return lo;
  return std::isfinite(hi) ? (lo + hi) / 2 : lo + 1;
}

}  // namespace

ObjectReader::ObjectReader(const json& object, std::string path, FieldRecorder* recorder)
    : object_(object), path_(std::move(path)), recorder_(recorder) {
  if (!object_.is_object()) throw ScenarioError(where(), ErrorKind::wrong_type, "expected an object, got " + describe(object_));
}

std::string ObjectReader::where(const std::string& key) const {
  return key.empty() ? (path_.empty() ? "/" : path_) : path_ + "/" + pointer_token(key);
}

const json* ObjectReader::find(const std::string& key) {
  seen_.insert(key);
  if (recorder_) recorder_->note({.key = key});
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

const json& ObjectReader::require(const std::string& key, const char* expected) {
  if (recorder_) recorder_->note({.key = key, .required = true});
  const json* v = find(key);
  if (!v && recorder_) {  // an empty object: a required object reads on; an array or a value fails its own check
    static const json nothing = json::object();
    return nothing;
  }
  if (!v) throw ScenarioError(where(key), ErrorKind::missing_field, fmt::format("missing required field (expected {})", expected));
  return *v;
}

double ObjectReader::number(const std::string& key, std::optional<double> fallback, double lo, double hi, bool lo_open) {
  if (recorder_) {
    FieldNote n{.key = key, .type = "number", .fallback = fallback ? json(*fallback) : json(), .required = !fallback};
    set_bounds(n, lo, hi, lo_open);
    recorder_->note(std::move(n));
    if (!fallback && !object_.contains(key)) fallback = placeholder(lo, hi, lo_open);
  }
  const json* v = fallback ? find(key) : &require(key, "a number");
  if (!v) return *fallback;
  if (!v->is_number()) throw ScenarioError(where(key), ErrorKind::wrong_type, "expected a number, got " + describe(*v));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi) || (lo_open && x == lo))  // NaN (from a document built in memory) is out of range
    throw ScenarioError(where(key), ErrorKind::out_of_range,
                        fmt::format("expected a number in {}{}, {}], got {}", lo_open ? "(" : "[", lo, hi, v->dump()));
  return x;
}

double ObjectReader::number_below(const std::string& key, std::optional<double> fallback, double lo, double hi) {
  const double x = number(key, fallback, lo, hi);
  if (x >= hi)
    throw ScenarioError(where(key), ErrorKind::out_of_range,
                        fmt::format("expected a number in [{}, {}), got {}", lo, hi, x));
  return x;
}

std::int64_t ObjectReader::integer(const std::string& key, std::optional<std::int64_t> fallback, std::int64_t lo,
                                   std::int64_t hi) {
  if (recorder_) {
    FieldNote n{.key = key, .type = "integer", .fallback = fallback ? json(*fallback) : json(), .required = !fallback};
    n.lo = static_cast<double>(lo);
    if (hi != kIntMax) n.hi = static_cast<double>(hi);
    recorder_->note(std::move(n));
    if (!fallback && !object_.contains(key)) fallback = lo;
  }
  const json* v = fallback ? find(key) : &require(key, "an integer");
  if (!v) return *fallback;
  if (!v->is_number_integer()) throw ScenarioError(where(key), ErrorKind::wrong_type, "expected an integer, got " + describe(*v));
  const bool too_big = v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi);
  const auto x = too_big ? hi : v->get<std::int64_t>();
  if (too_big || x < lo || x > hi)
    throw ScenarioError(where(key), ErrorKind::out_of_range,
                        fmt::format("expected an integer >= {}{}, got {}", lo,
                                    hi == kIntMax ? "" : fmt::format(" and <= {}", hi), v->dump()));
  return x;
}

bool ObjectReader::boolean(const std::string& key, bool fallback) {
  if (recorder_) recorder_->note({.key = key, .type = "boolean", .fallback = fallback});
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw ScenarioError(where(key), ErrorKind::wrong_type, "expected true or false, got " + describe(*v));
  return v->get<bool>();
}

std::string ObjectReader::string(const std::string& key, std::optional<std::string> fallback) {
  if (recorder_) {
    recorder_->note({.key = key, .type = "string", .fallback = fallback ? json(*fallback) : json(), .required = !fallback});
    if (!fallback && !object_.contains(key)) fallback = "";
  }
  const json* v = fallback ? find(key) : &require(key, "a string");
  if (!v) return *fallback;
  if (!v->is_string()) throw ScenarioError(where(key), ErrorKind::wrong_type, "expected a string, got " + describe(*v));
  return v->get<std::string>();
}

std::string ObjectReader::choice(const std::string& key, std::optional<std::string> fallback,
                                 const std::vector<std::string>& allowed, Fallback how) {
  if (recorder_) {
    recorder_->note({.key = key, .type = "string", .fallback = fallback ? json(*fallback) : json(), .required = !fallback,
                     .allowed = allowed, .fallback_derived = how == Fallback::derived});
    if (!fallback && !object_.contains(key) && !allowed.empty()) fallback = allowed.front();
  }
  std::string s = string(key, fallback);
  if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
    throw ScenarioError(where(key), ErrorKind::unknown_name,
                        fmt::format("expected one of {}, got {}{}", fmt::join(allowed, ", "),
                                    json(s).dump(-1, ' ', false, json::error_handler_t::replace),
                                    did_you_mean(s, allowed)));
  return s;
}

ObjectReader ObjectReader::object(const std::string& key, bool required) {
  static const json empty = json::object();
  if (recorder_) recorder_->note({.key = key, .type = "object", .required = required});
  const json* v = required && !recorder_ ? &require(key, "an object") : find(key);
  return ObjectReader(v ? *v : empty, where(key), recorder_ ? &recorder_->nested(key) : nullptr);
}

void ObjectReader::only_fields(std::span<const std::string> fields, std::span<const std::string> except,
                               const std::string& what) const {
  if (recorder_) recorder_->allow(std::vector<std::string>(fields.begin(), fields.end()));
  auto listed = [](std::span<const std::string> list, const std::string& key) {
    return std::find(list.begin(), list.end(), key) != list.end();
  };
  for (const auto& [key, value] : object_.items())
    if (!listed(except, key) && !listed(fields, key))
      throw ScenarioError(where(key), ErrorKind::unknown_field,
                          fmt::format("not a field of {}{} (its fields: {})", what, did_you_mean(key, fields),
                                      fields.empty() ? std::string("none") : fmt::format("{}", fmt::join(fields, ", "))));
}

void ObjectReader::finish() const {
  const std::vector<std::string> read(seen_.begin(), seen_.end());  // every field this object's parse looked for
  for (const auto& [key, value] : object_.items())
    if (!seen_.count(key))
      throw ScenarioError(where(key), ErrorKind::unknown_field, "unknown field" + did_you_mean(key, read));
}

}  // namespace dtsim::config
