// The compressor registry (kernels/compressor_kinds.hpp): names are unique and round-trip,
// each kind's fields are the ones its parse reads and its to_json writes, a spec's
// settings survive the round trip, and the per-kind facts agree with what a Compressor of
// that kind does.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/field_recorder.hpp"
#include "config/object_reader.hpp"
#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/codecs/qsgd.hpp"
#include "kernels/codecs/random_k.hpp"
#include "kernels/codecs/top_k.hpp"
#include "kernels/compressor.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/qsgd.hpp"

namespace dtsim::kernels {
namespace {

using nlohmann::json;
using V = std::vector<std::string>;

#if DTSIM_TORCH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

// `spec` as a scenario writes it, read back by the kind's own parse.
CompressorSpec read_back(const CompressorSpec& spec) {
  const auto& info = compressor_kind_info(spec.kind);
  json written = json::object();
  if (info.to_json) info.to_json(spec, written);
  config::ObjectReader reader(written, "");
  CompressorSpec read{.kind = spec.kind};
  if (info.parse) info.parse(reader, read);
  reader.finish();
  return read;
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
    EXPECT_EQ(&compressor_kind_info(info.name), &info);
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
    // A kind with fields reads and writes them; one without has neither.
    EXPECT_EQ(info.parse != nullptr, !info.fields.empty()) << info.name;
    EXPECT_EQ(info.to_json != nullptr, !info.fields.empty()) << info.name;
    EXPECT_EQ(info.set_keep_ratio != nullptr, info.keeps_k()) << info.name;
  }
  std::set<const codecs::CudaCodec*> twins;  // one twin per kind
  std::set<const codecs::Codec*> codecs;     // one codec per kind
  for (const auto& info : compressor_kinds()) twins.insert(info.cuda_codec), codecs.insert(info.codec);
  EXPECT_EQ(twins.size(), compressor_kinds().size());
  EXPECT_EQ(codecs.size(), compressor_kinds().size());
  EXPECT_EQ(find_compressor_kind("top-k"), nullptr);
  EXPECT_EQ(find_compressor_kind(""), nullptr);
  EXPECT_THROW(compressor_kind_info("top-k"), std::invalid_argument);
}

// What the codecs read, checked once by hand against codecs/: each kind's fields (then
// seed for the kinds that draw), and compressor_spec_fields(), their union in table order.
TEST(CompressorRegistry, FieldsAreWhatTheCodecsRead) {
  auto fields_of = [](std::string_view kind) { return compressor_kind_info(kind).field_names(); };
  EXPECT_EQ(fields_of("identity"), V{});
  EXPECT_EQ(fields_of("top_k"), V{"ratio"});
  EXPECT_EQ(fields_of("random_k"), (V{"ratio", "shared_seed", "unbiased", "seed"}));
  EXPECT_EQ(fields_of("threshold"), V{"threshold"});
  EXPECT_EQ(fields_of("sign"), V{});
  EXPECT_EQ(fields_of("scaled_sign"), V{});
  EXPECT_EQ(fields_of("qsgd"), (V{"levels", "tau_rescale", "bucket", "seed"}));
  EXPECT_EQ(fields_of("fp16"), V{});
  EXPECT_EQ(fields_of("bf16"), V{});
  EXPECT_EQ(fields_of("one_bit"), V{"bucket"});
  EXPECT_EQ(fields_of("terngrad"), (V{"bucket", "seed"}));
  EXPECT_EQ(fields_of("natural"), V{"seed"});
  const auto all = compressor_spec_fields();
  EXPECT_EQ(std::vector<std::string>(all.begin(), all.end()),
            (V{"ratio", "shared_seed", "unbiased", "seed", "threshold", "levels", "tau_rescale", "bucket"}));
  for (const auto& info : compressor_kinds())
    for (const auto& f : info.fields) {
      EXPECT_TRUE(info.reads(f.name)) << info.name;
      EXPECT_FALSE(f.description.empty()) << info.name << "." << f.name;
      EXPECT_EQ(f.description.find('\n'), std::string_view::npos) << info.name << "." << f.name;
    }
  EXPECT_FALSE(compressor_kind_info("top_k").reads("seed"));
  EXPECT_TRUE(compressor_kind_info("natural").reads("seed"));
}

// A kind's parse, run in recording mode on an empty object, reads exactly its fields, in
// their order, with its settings struct's defaults; to_json writes exactly those keys.
TEST(CompressorRegistry, ParseReadsTheListedFieldsAndToJsonWritesThem) {
  for (const auto& info : compressor_kinds()) {
    if (!info.parse) continue;
    SCOPED_TRACE(std::string(info.name));
    config::FieldRecorder recorder;
    const json empty = json::object();
    config::ObjectReader reader(empty, "", &recorder);
    CompressorSpec spec{.kind = std::string(info.name)};
    info.parse(reader, spec);
    V read;
    for (const auto& note : recorder.notes()) read.push_back(note.key);
    V listed;
    for (const auto& f : info.fields) listed.emplace_back(f.name);
    EXPECT_EQ(read, listed);
    json written = json::object();
    info.to_json(spec, written);
    V keys;
    for (const auto& [key, value] : written.items()) keys.push_back(key);
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(keys, listed);  // json's keys are sorted
    // The defaults parsed are the settings struct's: a spec without settings writes the same.
    json defaults = json::object();
    info.to_json(CompressorSpec{.kind = std::string(info.name)}, defaults);
    EXPECT_EQ(written, defaults);
  }
}

// Settings survive to_json and the kind's parse, and a spec of one kind refuses another's.
TEST(CompressorRegistry, SettingsRoundTrip) {
  const CompressorSpec random_k{.kind = "random_k",
                                .settings = RandomKSettings{.ratio = 0.25, .shared_seed = true, .unbiased = true}};
  const CompressorSpec random_k_read = read_back(random_k);
  const auto& r = compressor_settings<RandomKSettings>(random_k_read);
  EXPECT_EQ(r.ratio, 0.25);
  EXPECT_TRUE(r.shared_seed);
  EXPECT_TRUE(r.unbiased);
  const CompressorSpec qsgd{.kind = "qsgd", .settings = QsgdSettings{.levels = 7, .tau_rescale = true, .bucket = 512}};
  const CompressorSpec qsgd_read = read_back(qsgd);
  const auto& q = compressor_settings<QsgdSettings>(qsgd_read);
  EXPECT_EQ(q.levels, 7);
  EXPECT_TRUE(q.tau_rescale);
  EXPECT_EQ(q.bucket, 512);
  EXPECT_THROW(compressor_settings<TopKSettings>(qsgd), std::bad_any_cast);
  EXPECT_EQ(compressor_settings<TopKSettings>(CompressorSpec{.kind = "top_k"}).ratio, TopKSettings{}.ratio);
  EXPECT_EQ(compressor_kind_info("random_k").keep_ratio(with_keep_ratio(random_k, 0.5)), 0.5);
  EXPECT_TRUE(compressor_settings<RandomKSettings>(with_keep_ratio(random_k, 0.5)).shared_seed);  // the rest kept
  EXPECT_THROW(with_keep_ratio(qsgd, 0.5), std::invalid_argument);
}

// The facts in the table are what a Compressor of the kind does.
TEST(CompressorRegistry, FactsMatchTheCompressor) {
  const at::Tensor x = at::randn({1000}, at::detail::createCPUGenerator(4), at::kFloat);
  for (const auto& info : compressor_kinds()) {
    SCOPED_TRACE(std::string(info.name));
    CompressorSpec s{.kind = std::string(info.name), .seed = 1};
    if (info.keeps_k()) s = with_keep_ratio(s, 0.1);
    Compressor c(s);
    EXPECT_EQ(c.k_for(1000), info.keeps_k() ? 100 : 1000);
    EXPECT_EQ(c.keep_ratio(), info.keeps_k() ? 0.1 : 1.0);
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
    // `draws`: only the kinds that draw give other bytes for another seed.
    CompressorSpec other = s;
    other.seed = 2;
    Compressor c1(s), c2(other);
    Payload p1, p2;
    c1.compress(x, segs, p1);
    c2.compress(x, segs, p2);
    EXPECT_EQ(!at::equal(p1.bytes, p2.bytes), info.draws);
    EXPECT_EQ(p1.kind, info.name);
  }
}

// The optional facts that read the settings, for the kinds that have them.
TEST(CompressorRegistry, SettingsFactsAreTheKindsOwn) {
  V keeps, buckets, shares, own_bits;
  for (const auto& info : compressor_kinds()) {
    if (info.keeps_k()) keeps.emplace_back(info.name);
    if (info.bucket) buckets.emplace_back(info.name);
    if (info.shares_draws) shares.emplace_back(info.name);
    if (info.reference_bits) own_bits.emplace_back(info.name);
  }
  EXPECT_EQ(keeps, (V{"top_k", "random_k"}));
  EXPECT_EQ(buckets, (V{"qsgd", "one_bit", "terngrad"}));
  EXPECT_EQ(shares, V{"random_k"});
  EXPECT_EQ(own_bits, V{"qsgd"});
  const auto& random_k = compressor_kind_info("random_k");
  EXPECT_FALSE(random_k.shares_draws(CompressorSpec{.kind = "random_k"}));
  EXPECT_TRUE(random_k.shares_draws(CompressorSpec{.kind = "random_k", .settings = RandomKSettings{.shared_seed = true}}));
  // The reference's QSGD bits: ceil(log2(s + 1)) an element, no norm; the others their payload's.
  const std::vector<std::int64_t> segs{200, 7};
  EXPECT_EQ(Compressor(CompressorSpec{.kind = "qsgd"}).reference_bits(segs), 4U * 207U);
  EXPECT_EQ(Compressor(CompressorSpec{.kind = "qsgd", .settings = QsgdSettings{.levels = 255}}).reference_bits(segs),
            8U * 207U);
  Compressor sign(CompressorSpec{.kind = "sign"});
  EXPECT_EQ(sign.reference_bits(segs), 8U * static_cast<std::uint64_t>(sign.payload_bytes(segs, at::kFloat)));
}

// The memory estimates' bytes per fp32 byte.
TEST(CompressorRegistry, PayloadFraction) {
  auto fraction = [](std::string kind, std::any settings = {}) {
    return payload_fraction(CompressorSpec{.kind = std::move(kind), .settings = std::move(settings)});
  };
  EXPECT_EQ(fraction("identity"), 1.0);
  EXPECT_EQ(fraction("fp16"), 0.5);
  EXPECT_EQ(fraction("bf16"), 0.5);
  EXPECT_EQ(fraction("top_k", TopKSettings{.ratio = 0.1}), 2.0 * 0.1);
  EXPECT_EQ(fraction("random_k", RandomKSettings{.ratio = 0.1}), 2.0 * 0.1);
  EXPECT_EQ(fraction("random_k", RandomKSettings{.ratio = 0.1, .shared_seed = true}), 0.1);
  EXPECT_EQ(fraction("threshold"), 0.2);
  EXPECT_EQ(fraction("sign"), 1.0 / 32.0);
  EXPECT_EQ(fraction("scaled_sign"), 1.0 / 32.0);
  for (int levels : {2, 15, 255, 256})
    EXPECT_EQ(fraction("qsgd", QsgdSettings{.levels = levels}), cpu::qsgd_code_bits(levels) / 32.0);
  EXPECT_EQ(fraction("one_bit"), 1.0 / 32.0);
  EXPECT_EQ(fraction("terngrad"), 2.0 / 32.0);
  EXPECT_EQ(fraction("natural"), 9.0 / 32.0);
  EXPECT_EQ(fraction("top-k"), 1.0);
}

}  // namespace
}  // namespace dtsim::kernels
