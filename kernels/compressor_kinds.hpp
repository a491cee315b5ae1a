// The compressor registry: the one table (compressor_kinds.cpp) that lists every
// CompressorKind with its name, a one-line description, the paper it comes from, the
// CompressorSpec fields it reads and its codec (codecs/). The scenario parser, the
// memory estimates, the docs and the Compressor itself read it; nothing else lists the
// kinds. Adding a kind: kernels/README.md.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/compressor_spec.hpp"

namespace dtsim::kernels {

namespace codecs {
struct Codec;      // codecs/codec.hpp: how a kind encodes and decodes
struct CudaCodec;  // codecs/cuda_codec.hpp: its device twin
}

struct CompressorKindInfo {
  CompressorKind kind;
  std::string_view name;         // as in scenario JSON's /algorithm/compressor/kind
  std::string_view description;  // one line
  std::string_view paper;        // a short citation, or empty
  // The CompressorSpec fields (JSON keys under /algorithm/compressor besides "kind") the
  // kind reads, in compressor_spec_fields() order. Setting another is an error.
  std::vector<std::string_view> fields;
  // k = max(1, floor(n * ratio)) of each tensor's n elements is sent (Compressor::k_for);
  // otherwise k_for(n) = n.
  bool keeps_k = false;
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

  bool reads(std::string_view field) const;
};

// Every kind, in table order (today's enum order).
std::span<const CompressorKindInfo> compressor_kinds();
// The kind called `name`, or nullptr.
const CompressorKindInfo* find_compressor_kind(std::string_view name);
// The kind's entry; std::invalid_argument for a value the table lacks.
const CompressorKindInfo& compressor_kind_info(CompressorKind kind);
// The names in table order, for "expected one of ..." messages.
std::vector<std::string> compressor_kind_names();
// Every field a CompressorSpec has besides its kind, as JSON names them: ratio,
// threshold, levels, seed, shared_seed, unbiased, tau_rescale, bucket.
std::span<const std::string_view> compressor_spec_fields();

// Payload bytes per byte of the fp32 input, for memory estimates: identity 1, fp16 and
// bf16 0.5, top_k 2 ratio, random_k ratio (shared_seed) or 2 ratio, threshold 0.2 (at
// most 10 % kept, assumed), sign, scaled_sign and one_bit 1/32, qsgd its code bits / 32,
// terngrad 2/32, natural 9/32. The per-tensor headers (scales, norms, means, counts) and
// k's rounding are left out.
double payload_fraction(const CompressorSpec& spec);

// The Compressor constructor's checks, for readers that validate a spec without building
// one: `spec`'s kind is in the table, the fields it reads are in range, and it sets no
// other (seed aside); std::invalid_argument naming the field otherwise. Returns the
// kind's entry.
const CompressorKindInfo& checked_compressor_kind(const CompressorSpec& spec);

}  // namespace dtsim::kernels
