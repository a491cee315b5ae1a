#include "kernels/compressor_kinds.hpp"

#include <algorithm>
#include <any>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "config/scenario_error.hpp"
#include "kernels/codecs/codec.hpp"

namespace dtsim::kernels {

// Each kind's entry, defined in its codec file beside its codec.
namespace codecs {
CompressorKindInfo identity_kind();     // identity.cpp
CompressorKindInfo top_k_kind();        // top_k.cpp
CompressorKindInfo random_k_kind();     // random_k.cpp
CompressorKindInfo threshold_kind();    // threshold.cpp
CompressorKindInfo sign_kind();         // sign.cpp
CompressorKindInfo scaled_sign_kind();  // sign.cpp
CompressorKindInfo qsgd_kind();         // qsgd.cpp
CompressorKindInfo fp16_kind();         // cast.cpp
CompressorKindInfo bf16_kind();         // cast.cpp
CompressorKindInfo one_bit_kind();      // one_bit.cpp
CompressorKindInfo terngrad_kind();     // terngrad.cpp
CompressorKindInfo natural_kind();      // natural.cpp
}  // namespace codecs

namespace {

// The registry: the only place the kinds are listed, in the order the docs and
// `dtsim list compressors` show them.
const std::vector<CompressorKindInfo>& kinds_table() {
  static const std::vector<CompressorKindInfo> table{
      codecs::identity_kind(), codecs::top_k_kind(), codecs::random_k_kind(), codecs::threshold_kind(),
      codecs::sign_kind(),     codecs::scaled_sign_kind(), codecs::qsgd_kind(), codecs::fp16_kind(),
      codecs::bf16_kind(),     codecs::one_bit_kind(),     codecs::terngrad_kind(), codecs::natural_kind(),
  };
  return table;
}

}  // namespace

bool CompressorKindInfo::reads(std::string_view field) const {
  if (field == "seed") return draws;
  return std::any_of(fields.begin(), fields.end(), [&](const CompressorField& f) { return f.name == field; });
}

std::vector<std::string> CompressorKindInfo::field_names() const {
  std::vector<std::string> names;
  for (const auto& f : fields) names.emplace_back(f.name);
  if (draws) names.emplace_back("seed");
  return names;
}

std::span<const CompressorKindInfo> compressor_kinds() { return kinds_table(); }

const CompressorKindInfo* find_compressor_kind(std::string_view name) {
  for (const auto& info : kinds_table())
    if (info.name == name) return &info;
  return nullptr;
}

const CompressorKindInfo& compressor_kind_info(std::string_view name) {
  if (const auto* info = find_compressor_kind(name)) return *info;
  throw std::invalid_argument(
      fmt::format("CompressorSpec.kind: unknown kind \"{}\" (known: {})", name, fmt::join(compressor_kind_names(), ", ")));
}

std::vector<std::string> compressor_kind_names() {
  std::vector<std::string> names;
  for (const auto& info : kinds_table()) names.emplace_back(info.name);
  return names;
}

std::vector<std::string_view> compressor_spec_fields() {
  std::vector<std::string_view> names;
  auto add = [&](std::string_view name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const auto& info : kinds_table()) {
    for (const auto& f : info.fields) add(f.name);
    if (info.draws) add("seed");
  }
  return names;
}

const CompressorKindInfo& checked_compressor_kind(const CompressorSpec& spec) {
  const auto& info = compressor_kind_info(spec.kind);
  if (!info.parse) {
    if (spec.settings.has_value())
      throw std::invalid_argument(fmt::format("CompressorSpec.settings: {} has no fields, and settings were given", info.name));
    return info;
  }
  // The kind's own parse reads its settings back: the ranges are written once, there.
  nlohmann::json written = nlohmann::json::object();
  try {
    info.to_json(spec, written);
  } catch (const std::bad_any_cast&) {
    throw std::invalid_argument(fmt::format("CompressorSpec.settings: not {}'s settings struct", info.name));
  }
  try {
    config::ObjectReader reader(written, "");
    CompressorSpec read{.kind = spec.kind};
    info.parse(reader, read);
    reader.finish();
  } catch (const config::ScenarioError& e) {  // "/field: message" -> "CompressorSpec.field: message (kind)"
    const std::string what = e.what(), field = e.path().empty() ? "" : e.path().substr(1);
    const std::string message = what.size() > e.path().size() + 2 ? what.substr(e.path().size() + 2) : what;
    throw std::invalid_argument(fmt::format("CompressorSpec.{}: {} ({})", field, message, info.name));
  }
  return info;
}

double payload_fraction(const CompressorSpec& spec) {
  const auto* info = find_compressor_kind(spec.kind);
  return info ? info->codec->payload_fraction(spec) : 1.0;
}

CompressorSpec with_keep_ratio(CompressorSpec spec, double ratio) {
  const auto& info = compressor_kind_info(spec.kind);
  if (!info.keeps_k())
    throw std::invalid_argument(fmt::format("with_keep_ratio: {} sends every element, it keeps no ratio", info.name));
  info.set_keep_ratio(spec, ratio);
  return spec;
}

}  // namespace dtsim::kernels
