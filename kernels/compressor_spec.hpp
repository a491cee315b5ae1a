// kernels::CompressorSpec: what a scenario says about a compressor, apart from the
// compressor itself (compressor.hpp), so that the scenario's readers and the algorithms'
// settings need neither LibTorch nor the codecs.
#pragma once

#include <cstdint>
#include <string_view>

namespace dtsim::kernels {

// The kinds' names, descriptions, fields and codecs are listed once, in
// compressor_kinds.cpp (compressor_kinds.hpp: the registry); a new kind is a value here,
// an entry there and its codec in codecs/ (kernels/README.md).
enum class CompressorKind {
  identity,
  top_k,
  random_k,
  threshold,
  sign,
  scaled_sign,
  qsgd,
  fp16,
  bf16,
  one_bit,
  terngrad,
  natural,
};
std::string_view to_string(CompressorKind kind);  // the registry's name; "?" for a value it lacks
struct CompressorKindInfo;                         // compressor_kinds.hpp

struct CompressorSpec {
  CompressorKind kind = CompressorKind::identity;
  double ratio = 0.01;       // top_k, random_k: fraction of each tensor kept, in [0, 1]
  double threshold = 0.0;    // threshold: keep |x| >= threshold (finite, >= 0)
  int levels = 15;           // qsgd: s, in [2, 256] (the reference's 2^bits - 1)
  std::uint64_t seed = 0;    // random_k, qsgd, terngrad, natural
  bool shared_seed = false;  // random_k: every rank draws the same indices, which are not sent
  bool unbiased = false;     // random_k: values scaled by numel / k (the reference never does)
  bool tau_rescale = false;  // qsgd: norm times 1 / (min(d / s^2, sqrt(d) / s) + 1), CHOCO's biased QSGD
  // qsgd, one_bit, terngrad: 0 (one norm, pair of means or scale per tensor), or B, a
  // power of two in [32, 2^30]: one per bucket, the tensors also cut at the flat buffer's
  // multiples of B (QSGD's bucketed variant; d in tau_rescale is then the bucket's size;
  // 1-bit SGD's and TernGrad's per-bucket statistics). Buckets let the CPU QSGD encoder
  // read its input once, a block of whole buckets at a time, instead of twice.
  std::int64_t bucket = 0;
};

}  // namespace dtsim::kernels
