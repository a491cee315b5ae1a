#include "kernels/compressor_docs.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/compressor_kinds.hpp"

namespace dtsim::kernels {

namespace {

// One line per field, from the kinds' entries: "k1, k2: what it is" where the kinds
// reading it describe it alike, "k1: ...; k2: ..." where they do not.
std::string field_description(std::string_view field) {
  std::vector<std::pair<std::string, std::vector<std::string_view>>> texts;  // description -> kinds, in table order
  for (const auto& kind : compressor_kinds()) {
    std::string text;
    if (field == "seed" && kind.draws) text = "random stream seed (default: the scenario seed)";
    for (const auto& f : kind.fields)
      if (f.name == field) text = f.description;
    if (text.empty()) continue;
    auto at = std::find_if(texts.begin(), texts.end(), [&](const auto& t) { return t.first == text; });
    if (at == texts.end()) texts.push_back({text, {kind.name}});
    else at->second.push_back(kind.name);
  }
  std::vector<std::string> parts;
  for (const auto& [text, kinds] : texts) parts.push_back(fmt::format("{}: {}", fmt::join(kinds, ", "), text));
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string kind_description() {
  std::vector<std::string> parts;
  for (const auto& kind : compressor_kinds()) parts.push_back(fmt::format("{}: {}", kind.name, kind.description));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

std::span<const config::FieldDoc> compressor_docs() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t{kind_description()};
    for (auto field : compressor_spec_fields()) t.push_back(field_description(field));
    return t;
  }();
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> f;
    for (auto field : compressor_spec_fields()) f.emplace_back(field);
    return f;
  }();
  static const std::vector<config::FieldDoc> docs = [] {
    std::vector<config::FieldDoc> d{
        {"compressor", "",
         "The compressor C applied to each message (per parameter tensor for gossip algorithms); each kind reads only "
         "its own fields (its registry entry, beside its codec in kernels/codecs/), any other is an error."},
        {"compressor", "kind", texts[0]}};
    for (std::size_t i = 0; i < fields.size(); ++i) d.push_back({"compressor", fields[i], texts[i + 1]});
    return d;
  }();
  return docs;
}

}  // namespace dtsim::kernels
