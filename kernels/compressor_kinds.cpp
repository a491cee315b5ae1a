#include "kernels/compressor_kinds.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_codec.hpp"

namespace dtsim::kernels {

namespace {

// The registry: the only place the kinds are listed (the enum aside). Descriptions as
// the scenario schema's; fields in compressor_spec_fields() order.
const std::vector<CompressorKindInfo>& kinds_table() {
  static const std::vector<CompressorKindInfo> table{
      {.kind = CompressorKind::identity,
       .name = "identity",
       .description = "no compression: the values as they are",
       .paper = "",
       .fields = {},
       .codec = &codecs::identity_codec,
       .cuda_codec = &codecs::identity_cuda_codec},
      {.kind = CompressorKind::top_k,
       .name = "top_k",
       .description = "keep a ratio of each tensor's elements, the largest in magnitude",
       .paper = "Stich, Cordonnier, Jaggi 2018, Sparsified SGD with memory",
       .fields = {"ratio"},
       .keeps_k = true,
       .sends_indices = true,
       .codec = &codecs::top_k_codec,
       .cuda_codec = &codecs::top_k_cuda_codec},
      {.kind = CompressorKind::random_k,
       .name = "random_k",
       .description = "keep a ratio of each tensor's elements, drawn at random",
       .paper = "Stich, Cordonnier, Jaggi 2018, Sparsified SGD with memory",
       .fields = {"ratio", "seed", "shared_seed", "unbiased"},
       .keeps_k = true,
       .sends_indices = true,
       .codec = &codecs::random_k_codec,
       .cuda_codec = &codecs::random_k_cuda_codec},
      {.kind = CompressorKind::threshold,
       .name = "threshold",
       .description = "the elements with |x| >= threshold (the payload's size depends on the data)",
       .paper = "Strom 2015, Scalable distributed DNN training using commodity GPU cloud computing; "
                "Aji, Heafield 2017, Sparse communication for distributed gradient descent",
       .fields = {"threshold"},
       .sends_indices = true,
       .size_depends_on_data = true,
       .codec = &codecs::threshold_codec,
       .cuda_codec = &codecs::threshold_cuda_codec},
      {.kind = CompressorKind::sign,
       .name = "sign",
       .description = "1-bit signs",
       .paper = "Bernstein, Wang, Azizzadenesheli, Anandkumar 2018, signSGD",
       .fields = {},
       .codec = &codecs::sign_codec,
       .cuda_codec = &codecs::sign_cuda_codec},
      {.kind = CompressorKind::scaled_sign,
       .name = "scaled_sign",
       .description = "1-bit signs times each tensor's mean |x|",
       .paper = "Karimireddy, Rebjock, Stich, Jaggi 2019, Error feedback fixes SignSGD (EF-signSGD)",
       .fields = {},
       .codec = &codecs::scaled_sign_codec,
       .cuda_codec = &codecs::scaled_sign_cuda_codec},
      {.kind = CompressorKind::qsgd,
       .name = "qsgd",
       .description = "stochastic quantization to `levels` levels of each tensor's (or bucket's) norm",
       .paper = "Alistarh, Grubic, Li, Tomioka, Vojnovic 2017, QSGD",
       .fields = {"levels", "seed", "tau_rescale", "bucket"},
       .codec = &codecs::qsgd_codec,
       .cuda_codec = &codecs::qsgd_cuda_codec},
      {.kind = CompressorKind::fp16,
       .name = "fp16",
       .description = "16-bit IEEE half-precision floats",
       .paper = "",
       .fields = {},
       .fp32_input_only = true,
       .codec = &codecs::fp16_codec,
       .cuda_codec = &codecs::fp16_cuda_codec},
      {.kind = CompressorKind::bf16,
       .name = "bf16",
       .description = "16-bit bfloat16 floats",
       .paper = "",
       .fields = {},
       .fp32_input_only = true,
       .codec = &codecs::bf16_codec,
       .cuda_codec = &codecs::bf16_cuda_codec},
      {.kind = CompressorKind::one_bit,
       .name = "one_bit",
       .description = "1-bit signs decoded as the mean of each tensor's (or bucket's) elements on that side of 0 "
                      "(biased: pair it with error feedback)",
       .paper = "Seide, Fu, Droppo, Li, Yu 2014, 1-bit stochastic gradient descent and its application to "
                "data-parallel distributed training of speech DNNs",
       .fields = {"bucket"},
       .codec = &codecs::one_bit_codec,
       .cuda_codec = &codecs::one_bit_cuda_codec},
      {.kind = CompressorKind::terngrad,
       .name = "terngrad",
       .description = "stochastic ternary levels {-s, 0, +s}, s each tensor's (or bucket's) max |x| (unbiased)",
       .paper = "Wen, Xu, Yan, Wu, Wang, Chen, Li 2017, TernGrad: ternary gradients to reduce communication in "
                "distributed deep learning",
       .fields = {"seed", "bucket"},
       .codec = &codecs::terngrad_codec,
       .cuda_codec = &codecs::terngrad_cuda_codec},
      {.kind = CompressorKind::natural,
       .name = "natural",
       .description = "stochastic rounding of each element to a power of two, sent as sign and 8-bit exponent "
                      "(unbiased)",
       .paper = "Horvath, Ho, Horvath, Sahu, Canini, Richtarik 2019, Natural compression for distributed deep learning",
       .fields = {"seed"},
       .codec = &codecs::natural_codec,
       .cuda_codec = &codecs::natural_cuda_codec},
  };
  return table;
}

// CompressorSpec's fields besides its kind, with what the constructor checks of each.
struct SpecField {
  std::string_view name;
  // Whether `spec` sets it, i.e. differs from CompressorSpec{}'s value; a kind that does
  // not read the field refuses it then. nullptr: never refused (seed: callers give every
  // kind the run's seed, or a rank's, whether it draws anything or not).
  bool (*is_set)(const CompressorSpec& spec);
  // Its value's range, checked when the kind reads it (nullptr: any value); throws
  // std::invalid_argument naming the field.
  void (*check)(const CompressorSpec& spec);
};

const CompressorSpec kDefaults{};

void check_ratio(const CompressorSpec& s) {
  if (!(s.ratio >= 0.0 && s.ratio <= 1.0))
    throw std::invalid_argument(fmt::format("CompressorSpec.ratio: {} is not in [0, 1]", s.ratio));
}

void check_threshold(const CompressorSpec& s) {
  if (!(s.threshold >= 0.0 && std::isfinite(s.threshold)))
    throw std::invalid_argument(fmt::format("CompressorSpec.threshold: {} is not finite and >= 0", s.threshold));
}

void check_levels(const CompressorSpec& s) {
  if (s.levels < 2 || s.levels > 256)
    throw std::invalid_argument(fmt::format("CompressorSpec.levels: {} is not in [2, 256]", s.levels));
}

void check_bucket(const CompressorSpec& s) {
  const bool power_of_two = s.bucket > 0 && std::has_single_bit(static_cast<std::uint64_t>(s.bucket));
  if (s.bucket != 0 && (!power_of_two || s.bucket < 32 || s.bucket > (std::int64_t{1} << 30)))
    throw std::invalid_argument(fmt::format("CompressorSpec.bucket: {} is not 0 or a power of two in [32, 2^30]", s.bucket));
}

// In compressor_spec_fields() order, which is the JSON's (scenario.schema.json).
const std::array<SpecField, 8> kSpecFields{{
    {"ratio", [](const CompressorSpec& s) { return !(s.ratio == kDefaults.ratio); }, check_ratio},
    {"threshold", [](const CompressorSpec& s) { return !(s.threshold == kDefaults.threshold); }, check_threshold},
    {"levels", [](const CompressorSpec& s) { return s.levels != kDefaults.levels; }, check_levels},
    {"seed", nullptr, nullptr},
    {"shared_seed", [](const CompressorSpec& s) { return s.shared_seed != kDefaults.shared_seed; }, nullptr},
    {"unbiased", [](const CompressorSpec& s) { return s.unbiased != kDefaults.unbiased; }, nullptr},
    {"tau_rescale", [](const CompressorSpec& s) { return s.tau_rescale != kDefaults.tau_rescale; }, nullptr},
    {"bucket", [](const CompressorSpec& s) { return s.bucket != kDefaults.bucket; }, check_bucket},
}};

const std::array<std::string_view, kSpecFields.size()> kSpecFieldNames = [] {
  std::array<std::string_view, kSpecFields.size()> names;
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = kSpecFields[i].name;
  return names;
}();

const CompressorKindInfo* find_kind(CompressorKind kind) {
  for (const auto& info : kinds_table())
    if (info.kind == kind) return &info;
  return nullptr;
}

}  // namespace

bool CompressorKindInfo::reads(std::string_view field) const {
  return std::find(fields.begin(), fields.end(), field) != fields.end();
}

std::span<const CompressorKindInfo> compressor_kinds() { return kinds_table(); }

const CompressorKindInfo* find_compressor_kind(std::string_view name) {
  for (const auto& info : kinds_table())
    if (info.name == name) return &info;
  return nullptr;
}

const CompressorKindInfo& compressor_kind_info(CompressorKind kind) {
  if (const auto* info = find_kind(kind)) return *info;
  throw std::invalid_argument(fmt::format("CompressorKind: unknown value {}", static_cast<int>(kind)));
}

std::string_view to_string(CompressorKind kind) {
  const auto* info = find_kind(kind);
  return info ? info->name : "?";
}

std::vector<std::string> compressor_kind_names() {
  std::vector<std::string> names;
  for (const auto& info : kinds_table()) names.emplace_back(info.name);
  return names;
}

std::span<const std::string_view> compressor_spec_fields() { return kSpecFieldNames; }

const CompressorKindInfo& checked_compressor_kind(const CompressorSpec& spec) {
  const auto* info = find_kind(spec.kind);
  if (!info)
    throw std::invalid_argument(fmt::format("CompressorSpec.kind: unknown value {}", static_cast<int>(spec.kind)));
  for (const auto& field : kSpecFields) {
    if (info->reads(field.name)) {
      if (field.check) field.check(spec);
    } else if (field.is_set && field.is_set(spec)) {
      throw std::invalid_argument(fmt::format("CompressorSpec.{}: {} does not read {} (its fields: {})", field.name,
                                              info->name, field.name,
                                              info->fields.empty() ? "none" : fmt::format("{}", fmt::join(info->fields, ", "))));
    }
  }
  return *info;
}

double payload_fraction(const CompressorSpec& spec) {
  const auto* info = find_kind(spec.kind);
  return info ? info->codec->payload_fraction(spec) : 1.0;
}

}  // namespace dtsim::kernels
