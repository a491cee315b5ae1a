// The compressor registry (kernels/compressor_kinds.hpp): every CompressorKind has exactly
// one entry, names are unique and round-trip, the fields each kind lists are
// CompressorSpec's and are the ones the Compressor accepts, and the per-kind facts agree
// with what a Compressor of that kind does.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/compressor.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/qsgd.hpp"

namespace dtsim::kernels {
namespace {

using K = CompressorKind;

// A switch without a default: -Wswitch names an enumerator added without a case here.
bool is_enumerator(K kind) {
  switch (kind) {
    case K::identity:
    case K::top_k:
    case K::random_k:
    case K::threshold:
    case K::sign:
    case K::scaled_sign:
    case K::qsgd:
    case K::fp16:
    case K::bf16:
    case K::one_bit:
    case K::terngrad:
    case K::natural: return true;
  }
  return false;
}

std::vector<K> enumerators() {
  std::vector<K> all;
  for (int v = 0; v < 256; ++v)
    if (is_enumerator(static_cast<K>(v))) all.push_back(static_cast<K>(v));
  return all;
}

// A valid value other than CompressorSpec{}'s, for each field.
CompressorSpec with_field_set(K kind, std::string_view field) {
  CompressorSpec s;
  s.kind = kind;
  if (field == "ratio") s.ratio = 0.5;
  else if (field == "threshold") s.threshold = 1.0;
  else if (field == "levels") s.levels = 7;
  else if (field == "seed") s.seed = 99;
  else if (field == "shared_seed") s.shared_seed = true;
  else if (field == "unbiased") s.unbiased = true;
  else if (field == "tau_rescale") s.tau_rescale = true;
  else if (field == "bucket") s.bucket = 64;
  else ADD_FAILURE() << "no value for field " << field;
  return s;
}

#if DTSIM_TORCH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

TEST(CompressorRegistry, EveryKindHasExactlyOneEntry) {
  const auto table = compressor_kinds();
  const auto all = enumerators();
  EXPECT_EQ(table.size(), all.size());
  for (K kind : all) {
    const auto entries = std::count_if(table.begin(), table.end(), [&](const auto& info) { return info.kind == kind; });
    EXPECT_EQ(entries, 1) << "CompressorKind " << static_cast<int>(kind);
  }
  // Table order is today's enum order (what compressor_kind_names() lists).
  for (std::size_t i = 0; i < table.size(); ++i) EXPECT_EQ(static_cast<std::size_t>(table[i].kind), i);
}

TEST(CompressorRegistry, NamesAreUniqueAndRoundTrip) {
  std::set<std::string_view> names;
  const auto listed = compressor_kind_names();
  ASSERT_EQ(listed.size(), compressor_kinds().size());
  std::size_t i = 0;
  for (const auto& info : compressor_kinds()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate name " << info.name;
    EXPECT_FALSE(info.name.empty());
    EXPECT_EQ(listed[i++], info.name);
    ASSERT_NE(find_compressor_kind(info.name), nullptr) << info.name;
    EXPECT_EQ(find_compressor_kind(info.name), &info);
    EXPECT_EQ(&compressor_kind_info(info.kind), &info);
    EXPECT_EQ(to_string(info.kind), info.name);
    EXPECT_FALSE(info.description.empty()) << info.name;
    EXPECT_EQ(info.description.find('\n'), std::string_view::npos) << info.name;
    ASSERT_NE(info.codec, nullptr) << info.name;
    EXPECT_NE(info.codec->payload_bytes, nullptr) << info.name;
    EXPECT_NE(info.codec->payload_fraction, nullptr) << info.name;
    EXPECT_NE(info.codec->compress_cpu, nullptr) << info.name;
    EXPECT_NE(info.codec->decode_cpu, nullptr) << info.name;
    // Every kind names its device twin, which launches in a CUDA build.
    ASSERT_NE(info.cuda_codec, nullptr) << info.name;
    EXPECT_EQ(info.cuda_codec->compress != nullptr, kCudaBuild) << info.name;
    EXPECT_EQ(info.cuda_codec->decode != nullptr, kCudaBuild) << info.name;
  }
  std::set<const codecs::CudaCodec*> twins;  // one twin per kind
  for (const auto& info : compressor_kinds()) twins.insert(info.cuda_codec);
  EXPECT_EQ(twins.size(), compressor_kinds().size());
  EXPECT_EQ(find_compressor_kind("top-k"), nullptr);
  EXPECT_EQ(find_compressor_kind(""), nullptr);
  EXPECT_THROW(compressor_kind_info(static_cast<K>(42)), std::invalid_argument);
  EXPECT_EQ(to_string(static_cast<K>(42)), "?");
}

TEST(CompressorRegistry, FieldsAreCompressorSpecFieldsInOrder) {
  const auto spec_fields = compressor_spec_fields();
  const std::vector<std::string_view> expected{"ratio",       "threshold", "levels",      "seed",
                                               "shared_seed", "unbiased",  "tau_rescale", "bucket"};
  EXPECT_EQ(std::vector<std::string_view>(spec_fields.begin(), spec_fields.end()), expected);
  for (const auto& info : compressor_kinds()) {
    std::ptrdiff_t last = -1;
    for (auto field : info.fields) {
      const auto at = std::find(spec_fields.begin(), spec_fields.end(), field) - spec_fields.begin();
      ASSERT_LT(at, static_cast<std::ptrdiff_t>(spec_fields.size())) << info.name << " lists unknown field " << field;
      EXPECT_GT(at, last) << info.name << ": fields repeated or out of order";
      last = at;
      EXPECT_TRUE(info.reads(field));
    }
  }
  // What the code reads, checked once by hand against compressor.cpp and codecs/.
  auto fields_of = [](K kind) {
    const auto& f = compressor_kind_info(kind).fields;
    return std::vector<std::string_view>(f.begin(), f.end());
  };
  using V = std::vector<std::string_view>;
  EXPECT_EQ(fields_of(K::identity), V{});
  EXPECT_EQ(fields_of(K::top_k), V{"ratio"});
  EXPECT_EQ(fields_of(K::random_k), (V{"ratio", "seed", "shared_seed", "unbiased"}));
  EXPECT_EQ(fields_of(K::threshold), V{"threshold"});
  EXPECT_EQ(fields_of(K::sign), V{});
  EXPECT_EQ(fields_of(K::scaled_sign), V{});
  EXPECT_EQ(fields_of(K::qsgd), (V{"levels", "seed", "tau_rescale", "bucket"}));
  EXPECT_EQ(fields_of(K::fp16), V{});
  EXPECT_EQ(fields_of(K::bf16), V{});
  EXPECT_EQ(fields_of(K::one_bit), V{"bucket"});
  EXPECT_EQ(fields_of(K::terngrad), (V{"seed", "bucket"}));
  EXPECT_EQ(fields_of(K::natural), V{"seed"});
}

// For every (kind, field) pair from the table: a field the kind reads accepts a valid
// non-default value; one it does not read is refused (std::invalid_argument naming it)
// when set, except seed, which callers give every kind.
TEST(CompressorRegistry, ConstructorRefusesFieldsTheKindDoesNotRead) {
  for (const auto& info : compressor_kinds()) {
    EXPECT_NO_THROW(Compressor{CompressorSpec{.kind = info.kind}}) << info.name << " with the defaults";
    for (auto field : compressor_spec_fields()) {
      SCOPED_TRACE(std::string(info.name) + "." + std::string(field));
      const CompressorSpec s = with_field_set(info.kind, field);
      if (info.reads(field) || field == "seed") {
        EXPECT_NO_THROW(Compressor{s});
        continue;
      }
      try {
        Compressor c(s);
        ADD_FAILURE() << "accepted";
      } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.find("CompressorSpec." + std::string(field) + ":"), 0U) << what;
        EXPECT_NE(what.find(std::string(info.name) + " does not read " + std::string(field)), std::string::npos) << what;
      }
    }
  }
}

TEST(CompressorRegistry, ConstructorMessagesListTheKindsFields) {
  auto message = [](CompressorSpec s) {
    try {
      Compressor c(s);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(with_field_set(K::sign, "shared_seed")),
            "CompressorSpec.shared_seed: sign does not read shared_seed (its fields: none)");
  EXPECT_EQ(message(with_field_set(K::qsgd, "ratio")),
            "CompressorSpec.ratio: qsgd does not read ratio (its fields: levels, seed, tau_rescale, bucket)");
  CompressorSpec s;
  s.kind = static_cast<K>(42);
  EXPECT_EQ(message(s), "CompressorSpec.kind: unknown value 42");
}

// The facts in the table are what a Compressor of the kind does.
TEST(CompressorRegistry, FactsMatchTheCompressor) {
  for (const auto& info : compressor_kinds()) {
    SCOPED_TRACE(std::string(info.name));
    CompressorSpec s;
    s.kind = info.kind;
    if (info.reads("ratio")) s.ratio = 0.1;
    Compressor c(s);
    EXPECT_EQ(c.k_for(1000), info.keeps_k ? 100 : 1000);
    const std::vector<std::int64_t> segs{1000};
    if (info.size_depends_on_data)
      EXPECT_THROW(c.payload_bytes(segs, at::kFloat), std::logic_error);
    else
      EXPECT_GT(c.payload_bytes(segs, at::kFloat), 0);
    Payload p;
    const at::Tensor half = at::ones({8}, at::kHalf);
    if (info.fp32_input_only)
      EXPECT_THROW(c.compress(half, {}, p), std::invalid_argument);
    else
      EXPECT_NO_THROW(c.compress(half, {}, p));
  }
}

// The memory estimates' bytes per fp32 byte, as algorithms/registry.cpp's switch had them.
TEST(CompressorRegistry, PayloadFraction) {
  auto fraction = [](K kind, auto&& set) {
    CompressorSpec s;
    s.kind = kind;
    set(s);
    return payload_fraction(s);
  };
  auto none = [](CompressorSpec&) {};
  EXPECT_EQ(fraction(K::identity, none), 1.0);
  EXPECT_EQ(fraction(K::fp16, none), 0.5);
  EXPECT_EQ(fraction(K::bf16, none), 0.5);
  EXPECT_EQ(fraction(K::top_k, [](CompressorSpec& s) { s.ratio = 0.1; }), 2.0 * 0.1);
  EXPECT_EQ(fraction(K::random_k, [](CompressorSpec& s) { s.ratio = 0.1; }), 2.0 * 0.1);
  EXPECT_EQ(fraction(K::random_k, [](CompressorSpec& s) { s.ratio = 0.1, s.shared_seed = true; }), 0.1);
  EXPECT_EQ(fraction(K::threshold, none), 0.2);
  EXPECT_EQ(fraction(K::sign, none), 1.0 / 32.0);
  EXPECT_EQ(fraction(K::scaled_sign, none), 1.0 / 32.0);
  for (int levels : {2, 15, 255, 256})
    EXPECT_EQ(fraction(K::qsgd, [&](CompressorSpec& s) { s.levels = levels; }), cpu::qsgd_code_bits(levels) / 32.0);
  EXPECT_EQ(fraction(K::one_bit, none), 1.0 / 32.0);
  EXPECT_EQ(fraction(K::terngrad, none), 2.0 / 32.0);
  EXPECT_EQ(fraction(K::natural, none), 9.0 / 32.0);
  EXPECT_EQ(fraction(static_cast<K>(42), none), 1.0);
}

}  // namespace
}  // namespace dtsim::kernels
