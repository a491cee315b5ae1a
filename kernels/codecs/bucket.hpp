// The `bucket` field the quantizers with per-piece statistics share (qsgd, one_bit,
// terngrad): 0 for one statistic per tensor, or B, a power of two in [32, 2^30], for one
// per bucket of B elements, the tensors also cut at the flat buffer's multiples of B
// (Compressor::prepare_segments). Internal to kernels/.
#pragma once

#include <bit>
#include <cstdint>

#include <fmt/format.h>

#include "config/object_reader.hpp"
#include "kernels/codecs/bucket_settings.hpp"
#include "kernels/compressor_kinds.hpp"

namespace dtsim::kernels::codecs {

inline constexpr CompressorField kBucketField{
    "bucket",
    "0 for one norm, pair of means or scale (the kind's statistic) per tensor, or a power of two in [32, 2^30] for one "
    "per bucket of that many elements (the tensors also cut at the flat buffer's multiples of it)"};

inline std::int64_t read_bucket(config::ObjectReader& r, std::int64_t fallback) {
  const std::int64_t b = r.integer("bucket", fallback, 0, std::int64_t{1} << 30);
  if (b != 0 && (!std::has_single_bit(static_cast<std::uint64_t>(b)) || b < 32))
    throw config::ScenarioError(r.where("bucket"), config::ErrorKind::out_of_range,
                                fmt::format("expected 0 or a power of two in [32, 2^30], got {}", b));
  return b;
}

// The entry functions of a kind whose settings are BucketSettings (one_bit, terngrad).
inline void parse_bucket_settings(config::ObjectReader& r, CompressorSpec& spec) {
  BucketSettings s;
  s.bucket = read_bucket(r, s.bucket);
  spec.settings = s;
}

inline void bucket_settings_json(const CompressorSpec& spec, nlohmann::json& out) {
  out["bucket"] = compressor_settings<BucketSettings>(spec).bucket;
}

inline std::int64_t bucket_setting(const CompressorSpec& spec) { return compressor_settings<BucketSettings>(spec).bucket; }

}  // namespace dtsim::kernels::codecs
