// The compressor registry: the one table (compressor_kinds.cpp) that lists every kind.
// Each kind's entry is defined in its codec file (codecs/<kind>.cpp), beside its codec:
// its name, a one-line description, the paper it comes from, its fields, how it reads and
// writes its settings and its facts. The scenario parser, the memory estimates, the docs
// and the Compressor itself read it; nothing else lists the kinds. Adding a kind:
// kernels/README.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kernels/compressor_spec.hpp"

namespace dtsim::config {
class ObjectReader;  // config/object_reader.hpp
}

namespace dtsim::kernels {

namespace codecs {
struct Codec;      // codecs/codec.hpp: how a kind encodes and decodes
struct CudaCodec;  // codecs/cuda_codec.hpp: its device twin
}

// One field of a kind's settings, as JSON names it under /algorithm/compressor.
struct CompressorField {
  std::string_view name;
  std::string_view description;  // one line, for the scenario schema
};

struct CompressorKindInfo {
  std::string_view name;         // as in scenario JSON's /algorithm/compressor/kind
  std::string_view description;  // one line
  std::string_view paper;        // a short citation, or empty
  // Its settings' fields, in the order its parse reads them (seed aside). Setting another
  // is an error.
  std::vector<CompressorField> fields;
  // Draws at random from the (seed, round, segment) stream, so reads CompressorSpec::seed
  // (default: the scenario's).
  bool draws = false;
  // The payload lists the kept elements' indices with their values (random_k with
  // shared_seed sends the values only): a receiver learns which coordinates were sent.
  bool sends_indices = false;
  // The payload's size depends on the data, not only on the shapes (threshold):
  // Compressor::payload_bytes throws, and gossip, which exchanges equal-size messages,
  // refuses the kind.
  bool size_depends_on_data = false;
  // Takes fp32 input only (the casts); the others also take fp16 and bf16.
  bool fp32_input_only = false;
  const codecs::Codec* codec = nullptr;
  const codecs::CudaCodec* cuda_codec = nullptr;  // null or without launches: no CUDA path

  // Its settings (nullptr for a kind without fields): `parse` reads its fields, each with
  // its default and range, into spec.settings; `to_json` writes them back.
  void (*parse)(config::ObjectReader& reader, CompressorSpec& spec) = nullptr;
  void (*to_json)(const CompressorSpec& spec, nlohmann::json& out) = nullptr;
  // The share of each tensor's n elements kept, k = max(1, floor(n ratio))
  // (Compressor::k_for), and the spec with another share (a warm-up's); nullptr: every
  // element is sent, k_for(n) = n.
  double (*keep_ratio)(const CompressorSpec& spec) = nullptr;
  void (*set_keep_ratio)(CompressorSpec& spec, double ratio) = nullptr;
  // The bucket size B whose multiples also cut the segments (0: none); nullptr: no buckets.
  std::int64_t (*bucket)(const CompressorSpec& spec) = nullptr;
  // Every rank draws the same coordinates, which are then not sent (random_k with
  // shared_seed): callers give every rank the same seed. nullptr: never.
  bool (*shares_draws)(const CompressorSpec& spec) = nullptr;
  // The bits the CHOCO-SGD reference counts for d elements where they are not the
  // payload's (qsgd: ceil(log2(s + 1)) bits an element, no norm); nullptr: the payload's.
  std::uint64_t (*reference_bits)(const CompressorSpec& spec, std::int64_t d) = nullptr;

  bool keeps_k() const { return keep_ratio != nullptr; }
  bool reads(std::string_view field) const;  // one of its fields, or seed when it draws
  std::vector<std::string> field_names() const;  // its fields' names, then seed when it draws
};

// Every kind, in table order.
std::span<const CompressorKindInfo> compressor_kinds();
// The kind called `name`, or nullptr.
const CompressorKindInfo* find_compressor_kind(std::string_view name);
// The kind called `name`; std::invalid_argument naming the known kinds otherwise.
const CompressorKindInfo& compressor_kind_info(std::string_view name);
// The names in table order, for "expected one of ..." messages.
std::vector<std::string> compressor_kind_names();
// Every field some kind reads besides its kind, as JSON names them, in table order.
std::vector<std::string_view> compressor_spec_fields();

// Payload bytes per byte of the fp32 input, for memory estimates: identity 1, fp16 and
// bf16 0.5, top_k 2 ratio, random_k ratio (shared_seed) or 2 ratio, threshold 0.2 (at
// most 10 % kept, assumed), sign, scaled_sign and one_bit 1/32, qsgd its code bits / 32,
// terngrad 2/32, natural 9/32. The per-tensor headers (scales, norms, means, counts) and
// k's rounding are left out.
double payload_fraction(const CompressorSpec& spec);

// `spec` with each tensor's kept share set to `ratio` (a kind that keeps k); a warm-up's
// compressors. std::invalid_argument for a kind that sends every element.
CompressorSpec with_keep_ratio(CompressorSpec spec, double ratio);

// The Compressor constructor's checks, for readers that validate a spec without building
// one: `spec`'s kind is in the table, its settings are that kind's struct (or none), and
// every field is in its range (the kind's own parse reads them back); std::invalid_argument
// naming the field otherwise. Returns the kind's entry.
const CompressorKindInfo& checked_compressor_kind(const CompressorSpec& spec);

}  // namespace dtsim::kernels
