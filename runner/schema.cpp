#include "runner/schema.hpp"

#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "runner/scenario_schema.hpp"

namespace dtsim::runner {

using nlohmann::json;

namespace {

std::string escape_token(const std::string& t) {
  std::string out;
  for (char c : t) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return out;
}

std::string describe(const json& v) {
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string type_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool has_type(const json& v, const std::string& type) {
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer();
  return type_of(v) == type;
}

std::string join(const json& values) {
  std::string s;
  for (const auto& v : values) s += (s.empty() ? "" : ", ") + (v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  // The first error at or below `path`, or nullopt.
  std::optional<std::string> check(const json& schema, const json& v, const std::string& path) const {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return std::nullopt;
      return at(path) + ": not allowed here";
    }
    if (!schema.is_object()) throw std::invalid_argument("schema: expected an object or boolean schema");
    check_keywords(schema);
    std::optional<std::string> e = check_value(schema, v, path);
    if (!e && v.is_number()) e = check_number(schema, v, path);
    if (!e && v.is_string() && schema.contains("minLength") &&
        v.get<std::string>().size() < schema["minLength"].get<std::size_t>())
      e = fmt::format("{}: expected a string of at least {} characters", at(path), schema["minLength"].dump());
    if (!e && v.is_array()) e = check_array(schema, v, path);
    if (!e && v.is_object()) e = check_object(schema, v, path);
    return e ? e : check_combinators(schema, v, path);
  }

 private:
  // Every keyword of `schema` is one this validator knows (std::invalid_argument otherwise).
  static void check_keywords(const json& schema) {
    static const std::set<std::string> known{
        "$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples", "type", "enum", "const",
        "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "allOf", "anyOf", "oneOf", "not", "if", "then",
        "else", "$ref"};
    for (const auto& [key, value] : schema.items())
      if (!known.count(key)) throw std::invalid_argument(fmt::format("schema: keyword \"{}\" is not supported", key));
  }

  // $ref, type, enum and const.
  std::optional<std::string> check_value(const json& schema, const json& v, const std::string& path) const {
    if (schema.contains("$ref")) {
      if (auto e = check(resolve(schema["$ref"].get<std::string>()), v, path)) return e;
    }
    if (schema.contains("type")) {
      const json& t = schema["type"];
      bool ok = false;
      if (t.is_string()) ok = has_type(v, t.get<std::string>());
      else
        for (const auto& one : t) ok = ok || has_type(v, one.get<std::string>());
      if (!ok)
        return fmt::format("{}: expected {}, got {} {}", at(path), t.is_string() ? t.get<std::string>() : join(t),
                           type_of(v), describe(v));
    }
    if (schema.contains("enum")) {
      bool ok = false;
      for (const auto& e : schema["enum"]) ok = ok || e == v;
      if (!ok) return fmt::format("{}: expected one of {}, got {}", at(path), join(schema["enum"]), describe(v));
    }
    if (schema.contains("const") && schema["const"] != v)
      return fmt::format("{}: expected {}, got {}", at(path), schema["const"].dump(), describe(v));
    return std::nullopt;
  }

  // minimum, maximum (exclusive or not) and multipleOf.
  std::optional<std::string> check_number(const json& schema, const json& v, const std::string& path) const {
    const double x = v.get<double>();
    if (schema.contains("minimum") && x < schema["minimum"].get<double>())
      return fmt::format("{}: expected a number >= {}, got {}", at(path), schema["minimum"].dump(), v.dump());
    if (schema.contains("exclusiveMinimum") && x <= schema["exclusiveMinimum"].get<double>())
      return fmt::format("{}: expected a number > {}, got {}", at(path), schema["exclusiveMinimum"].dump(), v.dump());
    if (schema.contains("maximum") && x > schema["maximum"].get<double>())
      return fmt::format("{}: expected a number <= {}, got {}", at(path), schema["maximum"].dump(), v.dump());
    if (schema.contains("exclusiveMaximum") && x >= schema["exclusiveMaximum"].get<double>())
      return fmt::format("{}: expected a number < {}, got {}", at(path), schema["exclusiveMaximum"].dump(), v.dump());
    if (schema.contains("multipleOf")) {
      const double m = schema["multipleOf"].get<double>();
      if (std::fmod(x, m) != 0.0) return fmt::format("{}: expected a multiple of {}, got {}", at(path), schema["multipleOf"].dump(), v.dump());
    }
    return std::nullopt;
  }

  // minItems, maxItems and items.
  std::optional<std::string> check_array(const json& schema, const json& v, const std::string& path) const {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<std::size_t>())
      return fmt::format("{}: expected at least {} items, got {}", at(path), schema["minItems"].dump(), v.size());
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<std::size_t>())
      return fmt::format("{}: expected at most {} items, got {}", at(path), schema["maxItems"].dump(), v.size());
    if (schema.contains("items"))
      for (std::size_t i = 0; i < v.size(); ++i)
        if (auto e = check(schema["items"], v[i], fmt::format("{}/{}", path, i))) return e;
    return std::nullopt;
  }

  // required, properties and additionalProperties.
  std::optional<std::string> check_object(const json& schema, const json& v, const std::string& path) const {
    if (schema.contains("required"))
      for (const auto& key : schema["required"])
        if (!v.contains(key.get<std::string>()))
          return fmt::format("{}/{}: missing required field", path, escape_token(key.get<std::string>()));
    const json* props = schema.contains("properties") ? &schema["properties"] : nullptr;
    for (const auto& [key, value] : v.items()) {
      const std::string sub = path + "/" + escape_token(key);
      if (props && props->contains(key)) {
        if (auto e = check((*props)[key], value, sub)) return e;
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) {
          std::string expected;
          if (props)
            for (const auto& [name, s] : props->items()) expected += (expected.empty() ? "" : ", ") + name;
          return fmt::format("{}: unknown field{}", sub, expected.empty() ? "" : " (expected one of: " + expected + ")");
        }
        if (auto e = check(extra, value, sub)) return e;
      }
    }
    return std::nullopt;
  }

  // allOf, anyOf, oneOf, not, and if / then / else.
  std::optional<std::string> check_combinators(const json& schema, const json& v, const std::string& path) const {
    if (schema.contains("allOf"))
      for (const auto& s : schema["allOf"])
        if (auto e = check(s, v, path)) return e;
    if (schema.contains("anyOf")) {
      std::optional<std::string> first;
      bool ok = false;
      for (const auto& s : schema["anyOf"]) {
        auto e = check(s, v, path);
        if (!e) {
          ok = true;
          break;
        }
        if (!first) first = e;
      }
      if (!ok) return fmt::format("{}: matches none of the allowed forms (first: {})", at(path), *first);
    }
    if (schema.contains("oneOf")) {
      int matches = 0;
      std::optional<std::string> first;
      for (const auto& s : schema["oneOf"]) {
        auto e = check(s, v, path);
        if (!e) ++matches;
        else if (!first) first = e;
      }
      if (matches == 0) return fmt::format("{}: matches none of the allowed forms (first: {})", at(path), *first);
      if (matches > 1) return fmt::format("{}: matches more than one of the allowed forms", at(path));
    }
    if (schema.contains("not") && !check(schema["not"], v, path))
      return fmt::format("{}: matches a form that is not allowed", at(path));
    if (schema.contains("if")) {
      const bool holds = !check(schema["if"], v, path);
      if (holds && schema.contains("then")) {
        if (auto e = check(schema["then"], v, path)) return e;
      }
      if (!holds && schema.contains("else")) {
        if (auto e = check(schema["else"], v, path)) return e;
      }
    }
    return std::nullopt;
  }

  static std::string at(const std::string& path) { return path.empty() ? "/" : path; }

  const json& resolve(const std::string& ref) const {
    if (ref.empty() || ref[0] != '#') throw std::invalid_argument(fmt::format("schema: $ref \"{}\" is not local", ref));
    try {
      return root_.at(json::json_pointer(ref.substr(1)));
    } catch (const json::exception&) {
      throw std::invalid_argument(fmt::format("schema: $ref \"{}\" does not resolve", ref));
    }
  }

  const json& root_;
};

}  // namespace

std::optional<std::string> validate_schema(const json& schema, const json& doc) {
  return Validator(schema).check(schema, doc, "");
}

const json& scenario_schema() { return generated_scenario_schema().schema; }

std::optional<std::string> validate_scenario_schema(const json& doc) { return validate_schema(scenario_schema(), doc); }

}  // namespace dtsim::runner
