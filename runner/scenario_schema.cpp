#include "runner/scenario_schema.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "algorithms/algorithm_docs.hpp"
#include "algorithms/lr_schedule.hpp"
#include "algorithms/optimizers/optimizer.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"
#include "comm/compute_docs.hpp"
#include "comm/compute_section.hpp"
#include "config/field_doc.hpp"
#include "config/field_recorder.hpp"
#include "config/object_reader.hpp"
#include "kernels/compressor_docs.hpp"
#include "network_models/nccl/presets.hpp"
#include "network_models/nccl/system.hpp"
#include "network_models/network_docs.hpp"
#include "network_models/network_section.hpp"
#include "network_models/topology_section.hpp"
#include "runner/scenario_docs.hpp"
#include "workloads/workload_docs.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::runner {

using config::FieldDoc;
using config::FieldNote;
using config::FieldRecorder;
using config::ObjectReader;
using nlohmann::json;

namespace {

// How the generator runs one section's parse in recording mode.
struct Section {
  std::string name;                  // its $defs name
  std::string selector;              // the field that names the entry ("" for a section without entries)
  std::vector<std::string> aliases;  // older names of the selector
  // False where the selector's default is its caller's (an optimizer object's name): no
  // entry then applies to an object without a selector.
  bool default_entry = true;
  json base = json::object();  // fields every run starts from
  // Runs the section's parse on `doc` with `recorder`; `nested` leads from the
  // recorder to the section's object.
  std::function<void(const json& doc, FieldRecorder& recorder)> parse;
  std::vector<std::string> nested;
  // Nested objects that are sections of their own: key -> $defs name.
  std::map<std::string, std::string> refs;
};

// One recording parse.
struct Run {
  std::unique_ptr<FieldRecorder> recorder = std::make_unique<FieldRecorder>();
  const FieldRecorder* fields = nullptr;  // the section's object; nullptr when the parse stopped before it
  bool failed = false;                    // the parse stopped (a placeholder it refuses): it may not show every field

  bool reads(const std::string& key) const { return failed || (fields && fields->find(key)); }
};

Run record(const Section& s, const json& doc) {
  Run run;
  try {
    s.parse(doc, *run.recorder);
  } catch (const std::exception&) {
    run.failed = true;  // a required file, a placeholder a cross-field check refuses, ...
  }
  const FieldRecorder* at = run.recorder.get();
  for (const auto& key : s.nested) at = at ? at->nested_at(key) : nullptr;
  run.fields = at;
  return run;
}

// Two notes of one field (two runs, or two entries) as one: what either allows.
FieldNote merge(const FieldNote& a, const FieldNote& b) {
  if (a.type.empty()) return b.type.empty() ? FieldNote{.key = a.key, .required = a.required && b.required} : b;
  if (b.type.empty()) return a;
  FieldNote m{.key = a.key, .required = a.required && b.required};
  if (a.type == b.type) m.type = a.type;
  else if ((a.type == "integer" || a.type == "number") && (b.type == "integer" || b.type == "number")) m.type = "number";
  if (!a.allowed.empty() && !b.allowed.empty()) {
    m.allowed = a.allowed;
    for (const auto& v : b.allowed)
      if (std::find(m.allowed.begin(), m.allowed.end(), v) == m.allowed.end()) m.allowed.push_back(v);
  }
  if (a.lo && b.lo) {
    m.lo = std::min(*a.lo, *b.lo);
    m.lo_open = (*a.lo != *m.lo || a.lo_open) && (*b.lo != *m.lo || b.lo_open);
  }
  if (a.hi && b.hi) m.hi = std::max(*a.hi, *b.hi);
  if (a.fallback == b.fallback) m.fallback = a.fallback;
  return m;
}

// A number as JSON: integral values as integers (1, not 1.0), as a person writes them.
json number(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9007199254740992.0) return static_cast<std::int64_t>(x);
  return x;
}

json plain(const json& v) { return v.is_number_float() ? number(v.get<double>()) : v; }

// The keywords a note states (without its description).
json schema_of(const FieldNote& n, bool with_default) {
  json j = json::object();
  if (!n.type.empty() && n.type != "object") j["type"] = n.type;
  if (!n.allowed.empty()) j["enum"] = n.allowed;
  if (n.lo) j[n.lo_open ? "exclusiveMinimum" : "minimum"] = number(*n.lo);
  if (n.hi) j["maximum"] = number(*n.hi);
  if (with_default && !n.fallback.is_null()) j["default"] = plain(n.fallback);
  return j;
}

// The notes of several runs, by key, in the order first seen.
struct Notes {
  std::vector<FieldNote> list;

  void add(const FieldNote& n) {
    auto it = std::find_if(list.begin(), list.end(), [&](const FieldNote& o) { return o.key == n.key; });
    if (it == list.end()) list.push_back(n);
    else *it = merge(*it, n);
  }
  void add(const FieldRecorder* r) {
    if (r)
      for (const auto& n : r->notes()) add(n);
  }
  const FieldNote* find(const std::string& key) const {
    auto it = std::find_if(list.begin(), list.end(), [&](const FieldNote& o) { return o.key == key; });
    return it == list.end() ? nullptr : &*it;
  }
};

// What the recording learns about one entry (or a section without entries).
struct Entry {
  std::string name;
  Notes notes;                      // over every run
  std::vector<std::string> fields;  // the keys it allows, in order
  std::vector<std::string> required;
  json rules = json::array();       // fields a choice's value turns off
  const FieldRecorder* nested_source = nullptr;  // the base run, for nested objects
  std::vector<Run> runs;                         // kept alive for nested_source
  std::vector<std::string> problems;             // pairs of choices the rules misstate
};

// The rules of a choice `c` the entry reads: a field that some of its values do not read
// is forbidden where the choice names one of those values, or is absent and its default is
// one of them. A default that follows other fields (FieldNote::fallback_derived: a data
// source's file field selects it) counts only where it is written.
json choice_rules(const FieldNote& c, const std::map<std::string, const Run*>& by_value,
                  const std::vector<std::string>& fields) {
  // A field some value owns (FieldNote::fields_by_value) is read by the values that own it;
  // any other, by the values whose run read it.
  auto owned = [&](const std::string& f) {
    return std::any_of(c.fields_by_value.begin(), c.fields_by_value.end(),
                       [&](const auto& v) { return std::find(v.second.begin(), v.second.end(), f) != v.second.end(); });
  };
  auto reads = [&](const std::string& v, const std::string& f) {
    if (!owned(f)) return by_value.at(v)->reads(f);
    const auto it = c.fields_by_value.find(v);
    return it != c.fields_by_value.end() && std::find(it->second.begin(), it->second.end(), f) != it->second.end();
  };
  std::map<std::vector<std::string>, std::vector<std::string>> off_by_values;  // values that do not read -> fields
  for (const auto& f : fields) {
    if (f == c.key) continue;
    std::vector<std::string> others;
    for (const auto& v : c.allowed)
      if (!reads(v, f)) others.push_back(v);
    if (!others.empty() && others.size() < c.allowed.size()) off_by_values[others].push_back(f);
  }
  json rules = json::array();
  for (const auto& [others, off] : off_by_values) {
    json forbid = json::object();
    for (const auto& f : off) forbid[f] = false;
    const json values = others.size() == 1 ? json{{"const", others[0]}} : json{{"enum", others}};
    // An absent property passes "properties": without "required" the rule also holds
    // where the choice is left to its default.
    json condition = {{"properties", {{c.key, values}}}};
    const bool default_off = !c.fallback_derived && c.fallback.is_string() &&
                             std::find(others.begin(), others.end(), c.fallback.get<std::string>()) != others.end();
    if (!default_off) condition["required"] = {c.key};
    rules.push_back({{"if", condition}, {"then", {{"properties", forbid}}}});
  }
  return rules;
}

// The rules vary one choice at a time. Where two choices are set together, each field
// must be read exactly when neither value's own run turns it off: otherwise a field that
// only the combination turns off would be allowed (or one it turns on refused). Checked
// on every pair of non-default values whose joint parse completes.
using Choices = std::vector<std::pair<FieldNote, std::map<std::string, std::size_t>>>;

void check_pairs(const Section& s, const json& doc, const Choices& choices, Entry& e) {
  for (std::size_t i = 0; i < choices.size(); ++i)
    for (std::size_t j = i + 1; j < choices.size(); ++j)
      for (const auto& [v1, run1] : choices[i].second)
        for (const auto& [v2, run2] : choices[j].second) {
          if (run1 == 0 || run2 == 0) continue;  // a default value: the single runs are the pair's
          const std::string& k1 = choices[i].first.key;
          const std::string& k2 = choices[j].first.key;
          json both = doc;
          both[k1] = v1;
          both[k2] = v2;
          const Run joint = record(s, both);
          if (joint.failed) continue;
          for (const auto& f : e.fields) {
            if (f == k1 || f == k2) continue;
            const bool allowed = e.runs[0].reads(f) && e.runs[run1].reads(f) && e.runs[run2].reads(f);
            if (allowed != joint.reads(f))
              e.problems.push_back(fmt::format("{}/{}: {} is {} with {} {} and {} {}, which the one-choice rules do not say",
                                               s.name, e.name, f, allowed ? "not read" : "read", k1, v1, k2, v2));
          }
        }
}

Entry record_entry(const Section& s, const std::string& name) {
  Entry e{.name = name};
  json doc = s.base;
  if (!s.selector.empty()) doc[s.selector] = name;
  e.runs.push_back(record(s, doc));
  // The base run's notes (its recorder stays put while more runs are added).
  const FieldRecorder* const base = e.runs.front().fields;
  e.nested_source = base;
  e.notes.add(base);
  if (base && base->allowed()) e.fields = *base->allowed();
  // Each choice of the entry, value by value.
  Choices choices;
  if (base)
    for (const auto& c : base->notes()) {
      if (c.allowed.size() < 2 || c.key == s.selector || s.base.contains(c.key)) continue;
      const std::string read = doc.contains(c.key) ? doc[c.key].get<std::string>()
                               : c.fallback.is_string() ? c.fallback.get<std::string>()
                                                        : c.allowed.front();
      std::map<std::string, std::size_t> by_value;
      for (const auto& v : c.allowed) {
        if (v == read) {
          by_value[v] = 0;
          continue;
        }
        json variant = doc;
        variant[c.key] = v;
        e.runs.push_back(record(s, variant));
        by_value[v] = e.runs.size() - 1;
      }
      choices.emplace_back(c, std::move(by_value));
    }
  for (std::size_t i = 1; i < e.runs.size(); ++i) e.notes.add(e.runs[i].fields);
  // Required: what every run requires (a field one data source requires is not required
  // with another), leaving out runs that stopped before reading it; the generator's
  // seeds (Section::base) never are.
  if (base)
    for (const auto& n : base->notes()) {
      if (!n.required || n.key == s.selector || s.base.contains(n.key)) continue;
      if (std::all_of(e.runs.begin() + 1, e.runs.end(), [&](const Run& r) {
            const FieldNote* other = r.fields ? r.fields->find(n.key) : nullptr;
            return other ? other->required : r.failed;  // a run that stopped early may not have got there
          }))
        e.required.push_back(n.key);
    }
  if (!(base && base->allowed()))  // no field list named (only_fields): what it read
    for (const auto& n : e.notes.list) e.fields.push_back(n.key);
  check_pairs(s, doc, choices, e);
  for (const auto& [c, by_index] : choices) {
    std::map<std::string, const Run*> by_value;
    for (const auto& [v, i] : by_index) by_value[v] = &e.runs[i];
    for (auto& rule : choice_rules(c, by_value, e.fields)) e.rules.push_back(std::move(rule));
  }
  return e;
}

// Every folder's docs, by section and field.
class Docs {
 public:
  Docs() {
    for (auto table : {scenario_docs(), workloads::workload_docs(), algorithms::algorithm_docs(),
                       kernels::compressor_docs(), net::network_docs(), comm::compute_docs()})
      for (const auto& d : table) docs_[{std::string(d.section), std::string(d.field)}] = &d;
  }

  const FieldDoc* find(const std::string& section, const std::string& field) const {
    auto it = docs_.find({section, field});
    if (it == docs_.end()) return nullptr;
    used_.insert(it->first);
    return it->second;
  }
  // The declared schema of a field or section, or nullopt.
  std::optional<json> declared(const std::string& section, const std::string& field) const {
    const FieldDoc* d = find(section, field);
    if (!d || d->schema.empty()) return std::nullopt;
    return json::parse(d->schema);
  }
  std::string description(const std::string& section, const std::string& field) const {
    const FieldDoc* d = find(section, field);
    return d ? std::string(d->description) : std::string();
  }
  // The fields of a section the docs name, in their order.
  std::vector<std::string> fields_of(const std::string& section) const {
    std::vector<std::string> out;
    for (const auto& table : {scenario_docs(), workloads::workload_docs(), algorithms::algorithm_docs(),
                              kernels::compressor_docs(), net::network_docs(), comm::compute_docs()})
      for (const auto& d : table)
        if (d.section == section && !d.field.empty()) out.emplace_back(d.field);
    return out;
  }
  // Docs lines no section used: a field that no entry reads any more.
  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const auto& [key, doc] : docs_)
      if (!used_.count(key)) out.push_back(fmt::format("{}/{}: documented, but no parse reads it", key.first, key.second));
    return out;
  }

 private:
  std::map<std::pair<std::string, std::string>, const FieldDoc*> docs_;
  mutable std::set<std::pair<std::string, std::string>> used_;
};

class Generator {
 public:
  explicit Generator(std::vector<std::string>& problems) : problems_(problems) {}

  // The $defs entry of a section, from recording its parse: its properties (every entry's
  // fields, as loose as the loosest entry), then what is required and each entry's block.
  json section(const Section& s) {
    Recorded r{.probe = record(s, s.base)};
    if (!record_entries(s, r)) return json::object();
    const auto unless = docs_.declared(s.name, "");
    const std::string required_unless = unless && unless->contains("requiredUnless") ? (*unless)["requiredUnless"].get<std::string>() : "";
    Notes all;
    const auto order = field_order(s, r, all);

    json def = {{"type", "object"}, {"additionalProperties", false}};
    const std::string description = docs_.description(s.name, "");
    if (!description.empty()) def["description"] = description;
    def["properties"] = properties(s, r, order, all);
    json all_of = rules(s, r, order, all, required_unless, def);
    if (unless)
      for (const auto& [key, value] : unless->items()) {
        if (key == "requiredUnless") continue;
        if (key == "allOf") {
          for (const auto& rule : value) all_of.push_back(rule);
        } else {
          def[key] = value;
        }
      }
    if (!all_of.empty()) def["allOf"] = all_of;
    return def;
  }

  // A section no parse reads by itself (an edges topology's cable): its docs declare it.
  json declared_section(const std::string& name) {
    json def = {{"type", "object"}, {"additionalProperties", false}};
    const std::string description = docs_.description(name, "");
    if (!description.empty()) def["description"] = description;
    json properties = json::object();
    for (const auto& f : docs_.fields_of(name)) {
      json p = docs_.declared(name, f).value_or(json::object());
      with_description(p, name, f);
      properties[f] = p;
    }
    def["properties"] = properties;
    if (const auto extra = docs_.declared(name, ""))
      for (const auto& [key, value] : extra->items()) def[key] = value;
    return def;
  }

  std::vector<std::string> unused_docs() const { return docs_.unused(); }

 private:
  // A section's recording: the probe run (which holds the selector's note) and its entries.
  struct Recorded {
    Run probe;
    const FieldNote* selector = nullptr;  // in probe's recorder; nullptr for a section without entries
    std::vector<Entry> entries;
  };

  // Records every entry of the section; false (a problem noted) when the parse reads no
  // choice of entries at its selector.
  bool record_entries(const Section& s, Recorded& r) {
    if (!s.selector.empty()) {
      r.selector = r.probe.fields ? r.probe.fields->find(s.selector) : nullptr;
      if (!r.selector || r.selector->allowed.empty()) {
        problems_.push_back(fmt::format("{}/{}: the parse reads no choice of entries there", s.name, s.selector));
        return false;
      }
      for (const auto& name : r.selector->allowed) r.entries.push_back(record_entry(s, name));
    } else {
      r.entries.push_back(record_entry(s, ""));
    }
    for (const auto& e : r.entries) problems_.insert(problems_.end(), e.problems.begin(), e.problems.end());
    // An entry whose parse stopped before its last field and that names no field list
    // (only_fields) may read any field of the section: allow them all rather than refuse
    // one it reads.
    std::vector<std::string> every;
    for (const auto& e : r.entries)
      for (const auto& f : e.fields)
        if (std::find(every.begin(), every.end(), f) == every.end()) every.push_back(f);
    for (auto& e : r.entries)
      if (e.runs.front().failed && !(e.nested_source && e.nested_source->allowed())) e.fields = every;
    return true;
  }

  // The def's fields in order (the entries', the selector first, then the ones only the
  // docs declare), their notes gathered into `all`.
  std::vector<std::string> field_order(const Section& s, const Recorded& r, Notes& all) const {
    std::vector<std::string> order;
    for (const auto& e : r.entries)
      for (const auto& f : e.fields) {
        if (std::find(order.begin(), order.end(), f) == order.end()) order.push_back(f);
        if (const FieldNote* n = e.notes.find(f)) all.add(*n);
      }
    if (r.selector && std::find(order.begin(), order.end(), s.selector) == order.end())
      order.insert(order.begin(), s.selector);
    for (const auto& f : docs_.fields_of(s.name))
      if (std::find(order.begin(), order.end(), f) == order.end() &&
          (docs_.declared(s.name, f) || std::find(s.aliases.begin(), s.aliases.end(), f) != s.aliases.end()))
        order.push_back(f);
    return order;
  }

  json properties(const Section& s, const Recorded& r, const std::vector<std::string>& order, const Notes& all) {
    json properties = json::object();
    for (const auto& f : order) properties[f] = property(s, f, all.find(f), r.entries);
    if (r.selector) {
      json p = schema_of(*r.selector, s.default_entry);
      p["enum"] = r.selector->allowed;
      with_description(p, s.name, s.selector);
      properties[s.selector] = p;
      for (const auto& alias : s.aliases) {
        json a = schema_of(*r.selector, false);
        with_description(a, s.name, alias);
        properties[alias] = a;
      }
    }
    return properties;
  }

  // The def's allOf: what every entry requires (at the def), then each entry's block, or
  // the rules of a section without entries.
  json rules(const Section& s, const Recorded& r, const std::vector<std::string>& order, const Notes& all,
             const std::string& required_unless, json& def) {
    const auto& entries = r.entries;
    std::vector<std::string> common;
    if (r.selector && r.selector->required) common.push_back(s.selector);
    for (const auto& f : entries.front().required)
      if (std::all_of(entries.begin(), entries.end(),
                      [&](const Entry& e) { return std::count(e.required.begin(), e.required.end(), f) > 0; }))
        common.push_back(f);
    json all_of = json::array();
    if (!common.empty()) add_required(def, all_of, common, required_unless);
    if (!r.selector) {
      for (const auto& rule : entries.front().rules) all_of.push_back(rule);
      return all_of;
    }
    // Fields of the section that no entry reads (a key resolved before the parse, an
    // older name of the selector) are every entry's.
    std::vector<std::string> shared;
    for (const auto& f : order)
      if (f != s.selector && std::none_of(entries.begin(), entries.end(), [&](const Entry& e) {
            return std::count(e.fields.begin(), e.fields.end(), f) > 0;
          }))
        shared.push_back(f);
    for (const auto& e : entries) all_of.push_back(entry_block(s, e, all, common, required_unless, *r.selector, shared));
    return all_of;
  }

  // A section recorded from a seed (an nccl system from a preset) reads the seed's values
  // as its defaults: they are not the section's own.
  static bool stated_defaults(const Section& s) { return s.base.empty(); }

  void with_description(json& p, const std::string& section, const std::string& field) const {
    const std::string d = docs_.description(section, field);
    if (!d.empty()) p["description"] = d;
  }

  // A field at the def: its reference, its declared schema, or what the recording saw.
  json property(const Section& s, const std::string& f, const FieldNote* note, const std::vector<Entry>& entries) {
    json p;
    if (auto ref = s.refs.find(f); ref != s.refs.end()) {
      p = {{"$ref", "#/$defs/" + ref->second}};
    } else if (auto declared = docs_.declared(s.name, f)) {
      p = *declared;
    } else if (note && note->type == "object") {
      p = nested_object(s.name + "." + f, f, entries, stated_defaults(s));
    } else if (note && !note->type.empty()) {
      p = schema_of(*note, stated_defaults(s));
    } else {
      if (std::find(s.aliases.begin(), s.aliases.end(), f) == s.aliases.end() && f != s.selector)
        problems_.push_back(fmt::format("{}/{}: read by hand; declare its schema in the section's docs", s.name, f));
      p = json::object();
    }
    with_description(p, s.name, f);
    return p;
  }

  // An object inside a section, from the entries' base runs.
  json nested_object(const std::string& name, const std::string& key, const std::vector<Entry>& entries, bool defaults) {
    Notes notes;
    for (const auto& e : entries)
      if (e.nested_source)
        if (const FieldRecorder* n = e.nested_source->nested_at(key)) notes.add(n);
    json properties = json::object();
    for (const auto& n : notes.list) {
      json p;
      if (auto declared = docs_.declared(name, n.key)) {
        p = *declared;
      } else if (!n.type.empty() && n.type != "object") {
        p = schema_of(n, defaults);
      } else {
        problems_.push_back(fmt::format("{}/{}: read by hand; declare its schema in the section's docs", name, n.key));
        p = json::object();
      }
      with_description(p, name, n.key);
      properties[n.key] = p;
    }
    json p = {{"type", "object"}, {"additionalProperties", false}, {"properties", properties}};
    return p;
  }

  static void add_required(json& block, json& all_of, const std::vector<std::string>& fields, const std::string& unless) {
    if (unless.empty()) block["required"] = fields;
    else all_of.push_back({{"if", {{"required", {unless}}}}, {"else", {{"required", fields}}}});
  }

  // The if/then block of one entry: the fields it allows (narrower where the entry's
  // reads are), the ones it requires, and its choices' rules.
  json entry_block(const Section& s, const Entry& e, const Notes& all, const std::vector<std::string>& common,
                   const std::string& unless, const FieldNote& selector, const std::vector<std::string>& shared) {
    json named = {{"properties", {{s.selector, {{"const", e.name}}}}}, {"required", {s.selector}}};
    json condition = named;
    const bool is_default = s.default_entry && selector.fallback.is_string() && selector.fallback.get<std::string>() == e.name;
    if (!s.aliases.empty() || is_default) {
      json any = json::array({named});
      json present = json::array({json{{"required", {s.selector}}}});
      for (const auto& alias : s.aliases) {
        any.push_back({{"properties", {{alias, {{"const", e.name}}}}}, {"required", {alias}}});
        present.push_back({{"required", {alias}}});
      }
      if (is_default) any.push_back({{"not", {{"anyOf", present}}}});
      condition = {{"anyOf", any}};
    }
    json properties = {{s.selector, true}};
    for (const auto& f : shared) properties[f] = true;
    for (const auto& f : e.fields) {
      if (f == s.selector) continue;
      const FieldNote* mine = e.notes.find(f);
      const FieldNote* any = all.find(f);
      json own = mine ? schema_of(*mine, false) : json::object();
      if (s.refs.count(f) || (mine && mine->type == "object") || !mine || !any || own == schema_of(*any, false) ||
          own.empty())
        properties[f] = true;
      else
        properties[f] = own;
    }
    json then = {{"properties", properties}, {"additionalProperties", false}};
    json all_of = json::array();
    std::vector<std::string> required;
    for (const auto& f : e.required)
      if (std::find(common.begin(), common.end(), f) == common.end()) required.push_back(f);
    if (!required.empty()) add_required(then, all_of, required, unless);
    for (const auto& rule : e.rules) all_of.push_back(rule);
    if (!all_of.empty()) then["allOf"] = all_of;
    return {{"if", condition}, {"then", then}};
  }

  std::vector<std::string>& problems_;
  Docs docs_;
};

// A section's parse of `doc` as the object at `key` of its parent (at `path`).
template <class Parse>
std::function<void(const json&, FieldRecorder&)> at_key(std::string path, std::string key, Parse parse) {
  return [path, key, parse](const json& doc, FieldRecorder& recorder) {
    const json outer = {{key, doc}};
    ObjectReader r(outer, path, &recorder);
    parse(r);
  };
}

// A section's parse of `doc` as the object at `path`.
template <class Parse>
std::function<void(const json&, FieldRecorder&)> whole(std::string path, Parse parse) {
  return [path, parse](const json& doc, FieldRecorder& recorder) {
    ObjectReader r(doc, path, &recorder);
    parse(r);
  };
}

std::vector<Section> sections() {
  constexpr int kRanks = 1;  // bounds that depend on the rank count (an edges topology's nodes) start at 1
  return {
      {.name = "workload",
       .selector = "type",
       .aliases = {"kind"},
       .parse = whole("/workload", [](ObjectReader& r) { workloads::parse_workload_section(r, {.ranks = kRanks}); })},
      {.name = "algorithm",
       .selector = "name",
       .parse = whole("/algorithm", [](ObjectReader& r) { algorithms::parse_algorithm_section(r, {}); }),
       .refs = {{"lr_schedule", "lr_schedule"}, {"compressor", "compressor"}}},
      {.name = "compressor",
       .selector = "kind",
       .parse = at_key("/algorithm", "compressor", [](ObjectReader& r) { algorithms::parse_compressor(r, {}); }),
       .nested = {"compressor"}},
      {.name = "lr_schedule",
       .selector = "type",
       .parse = at_key("/algorithm", "lr_schedule", [](ObjectReader& r) { algorithms::parse_lr_schedule(r, 0.1); }),
       .nested = {"lr_schedule"},
       .refs = {{"lr_scaleup", "lr_scaleup"}}},
      {.name = "lr_scaleup",
       .selector = "factor",
       .parse =
           [](const json& doc, FieldRecorder& recorder) {
             const json outer = {{"lr_schedule", {{"lr_scaleup", doc}}}};
             ObjectReader r(outer, "/algorithm", &recorder);
             algorithms::parse_lr_schedule(r, 0.1);
           },
       .nested = {"lr_schedule", "lr_scaleup"}},
      {.name = "optimizer",
       .selector = "name",
       .default_entry = false,
       .parse = whole("/algorithm/inner_optimizer",
                      [](ObjectReader& r) { algorithms::optimizers::parse_optimizer(r, "sgd"); })},
      {.name = "topology",
       .selector = "kind",
       .parse = whole("/topology", [](ObjectReader& r) { net::parse_topology_section(r, kRanks); })},
      {.name = "network",
       .selector = "model",
       .parse = whole("/network", [](ObjectReader& r) { net::parse_network_section(r, kRanks, 0); })},
      {.name = "nccl_system",
       // A preset is read only when named; any one shows its field.
       .base = {{"preset", net::nccl::system_preset_list().front()}},
       .parse = [](const json& doc, FieldRecorder& recorder) { net::nccl::parse_system(doc, "/network/system", &recorder); }},
      {.name = "compute",
       .parse = whole("/compute", [](ObjectReader& r) { comm::parse_compute_section(r, kRanks); })},
  };
}

GeneratedSchema generate() {
  GeneratedSchema out;
  Generator g(out.problems);
  const Section root{.name = "scenario",
                     .parse = [](const json& doc, FieldRecorder& recorder) { record_scenario_fields(doc, recorder); },
                     .refs = {{"workload", "workload"},
                              {"algorithm", "algorithm"},
                              {"topology", "topology"},
                              {"network", "network"},
                              {"compute", "compute"}}};
  json schema = g.section(root);
  json defs = json::object();
  for (const auto& s : sections()) defs[s.name] = g.section(s);
  defs["edge"] = g.declared_section("edge");
  schema["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  schema["$id"] = "https://github.com/dtsim/dtsim/scenarios/scenario.schema.json";
  schema["title"] = "dtsim scenario";
  schema["$comment"] = "Generated by `dtsim schema` from the parse functions and each folder's docs table: do not edit.";
  schema["$defs"] = defs;
  for (auto& p : g.unused_docs()) out.problems.push_back(std::move(p));
  out.schema = std::move(schema);
  return out;
}

}  // namespace

const GeneratedSchema& generated_scenario_schema() {
  static const GeneratedSchema generated = generate();
  return generated;
}

std::string scenario_schema_text() { return generated_scenario_schema().schema.dump(2) + "\n"; }

}  // namespace dtsim::runner
