// one_bit: 1-bit SGD (Seide, Fu, Droppo, Li, Yu, Interspeech 2014). Per piece l (a tensor,
// or with `bucket` B a bucket of it: the tensors also cut at the flat buffer's multiples
// of B, as qsgd's), every element is sent as one bit, x_i < 0 or not, and is decoded as
// the mean of its piece's elements on the same side:
//
//   mean+_l = sum_{i in l, x_i >= 0} x_i / n+_l      mean-_l = sum_{i in l, x_i < 0} x_i / n-_l
//   decoded_i = x_i < 0 ? mean-_l : mean+_l          (a side with no element: 0)
//
// (0, -0 and NaN count with x >= 0, as in sign: a NaN makes its piece's mean+ NaN.)
// Deterministic and biased. The paper's error feedback (the quantization error carried
// into the next step) is the algorithm's: Compressor::compress_feedback runs it unfused
// (memory += x; q = C(memory); memory -= decode(q)), which any algorithm with memory gets.
//
// Wire: 2L fp32 means (the L mean+, then the L mean-), then ceil(n/32) uint32 words of
// sign bits packed as sign's (cpu/sign.hpp). The side sums follow the canonical order of
// cpu/common.hpp and n-_l is the popcount of the piece's bits, so the CUDA path
// (cuda/quantizers.cu) sends the same bytes.
#include <ATen/Parallel.h>

#include <algorithm>
#include <bit>

#include "kernels/codecs/bucket.hpp"
#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/codecs/decode_each.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/cpu/sign.hpp"
#include "kernels/detail/quantizers.hpp"

namespace dtsim::kernels::codecs {

namespace {

using cpu::kChunk;

std::int64_t sign_words_bytes(std::int64_t n) { return 4 * ((n + 31) / 32); }

std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) {
  return 8 * shape.L + sign_words_bytes(shape.n);
}

double payload_fraction(const CompressorSpec&) { return 1.0 / 32.0; }

// The 32 lane sums of a chunk folded as a warp folds them (cpu/common.hpp).
float fold_lanes(float* lane) {
  for (int half = 16; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) lane[l] += lane[l + half];
  return lane[0];
}

// The canonical partial sums of each (piece, chunk) pair's non-negative and negative
// parts into up[slot] and down[slot] (slot layout of cpu::partial_slots). A piece's lanes
// sum only the rows it overlaps: the other rows would add +0 to sums that are +0, >= 0,
// NaN or < 0, which changes no bit, so small buckets cost their own rows only.
template <class T>
void side_partials(const T* x, std::int64_t n, const std::int64_t* off, std::int64_t L,
                   const std::int64_t* slot_begin, float* up, float* down) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  at::parallel_for(0, chunks, 16, [&](std::int64_t c0, std::int64_t c1) {
    std::int64_t s = std::upper_bound(off, off + L + 1, c0 * kChunk) - off - 1;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t base = c * kChunk, end = std::min(n, base + kChunk);
      while (s < L && off[s + 1] <= base) ++s;
      for (std::int64_t t = s; t < L && off[t] < end; ++t) {
        const std::int64_t a = std::max(off[t], base), b = std::min(off[t + 1], end);
        if (b <= a) continue;
        float lane_up[32] = {}, lane_down[32] = {};
        for (std::int64_t row = base + (a - base) / 32 * 32; row < b; row += 32)
          for (int l = 0; l < 32; ++l) {
            const std::int64_t i = row + l;
            const float v = i >= a && i < b ? cpu::to_float(x[i]) : 0.0f;
            lane_up[l] += detail::non_negative_part(v);
            lane_down[l] += detail::negative_part(v);
          }
        const std::int64_t slot = slot_begin[t] + c - off[t] / kChunk;
        up[slot] = fold_lanes(lane_up);
        down[slot] = fold_lanes(lane_down);
      }
    }
  });
}

// Set bits of the packed stream in [a, b): the piece's negative elements.
std::int64_t count_negatives(const std::uint32_t* words, std::int64_t a, std::int64_t b) {
  std::int64_t count = 0;
  for (std::int64_t i = a; i < b;) {
    const std::int64_t w = i / 32, lo = i % 32, hi = std::min<std::int64_t>(32, b - 32 * w);
    const std::uint32_t bits = words[w] >> lo;
    count += std::popcount(hi - lo == 32 ? bits : bits & ((1U << (hi - lo)) - 1U));
    i = 32 * w + hi;
  }
  return count;
}

void compress_cpu(const CompressorSpec&, Workspace& ws, const at::Tensor& flat, Payload& out) {
  const std::int64_t n = flat.numel();
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    ensure_bytes(out, 8 * L + sign_words_bytes(n), flat.device());
    auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
    auto* means = reinterpret_cast<float*>(base);  // mean+ in [0, L), mean- in [L, 2L)
    auto* words = reinterpret_cast<std::uint32_t*>(base + 8 * L);
    cpu::pack_signs(x, n, off, L, nullptr, words, nullptr);
    ws.slot_begin.resize(static_cast<std::size_t>(L) + 1);
    const std::int64_t slots = cpu::partial_slots(off, L, ws.slot_begin.data());
    ws.partials.resize(static_cast<std::size_t>(2 * slots));
    float* up = ws.partials.data();
    float* down = up + slots;
    side_partials(x, n, off, L, ws.slot_begin.data(), up, down);
    cpu::fold_partials(up, ws.slot_begin.data(), L, means);
    cpu::fold_partials(down, ws.slot_begin.data(), L, means + L);
    for (std::int64_t s = 0; s < L; ++s) {
      const std::int64_t negatives = count_negatives(words, off[s], off[s + 1]);
      means[s] = detail::one_bit_mean(means[s], off[s + 1] - off[s] - negatives);
      means[L + s] = detail::one_bit_mean(means[L + s], negatives);
    }
  });
}

void decode_cpu(const CompressorSpec&, Workspace& ws, const Decode& call) {
  const auto L = ws.segment_count();
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  const auto* means = reinterpret_cast<const float*>(base);
  const auto* words = reinterpret_cast<const std::uint32_t*>(base + 8 * L);
  decode_each_in_segment(ws, call, [&](std::int64_t i, std::int64_t s) {
    return (words[i / 32] >> (i % 32)) & 1U ? means[L + s] : means[s];
  });
}

}  // namespace

// No fused error feedback: Compressor::compress_feedback makes the three calls.
const Codec one_bit_codec{.payload_bytes = payload_bytes,
                          .payload_fraction = payload_fraction,
                          .compress_cpu = compress_cpu,
                          .decode_cpu = decode_cpu};

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

void one_bit_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  ensure_bytes(out, 8 * L + 4 * ((c.n + 31) / 32), c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::one_bit_encode(c.x, c.n, c.d_off, L, c.d_slot, c.slots, c.partials,
                       reinterpret_cast<unsigned long long*>(c.dev + c.t.counts), reinterpret_cast<float*>(base),
                       reinterpret_cast<std::uint32_t*>(base + 8 * L), c.stream);
}

void one_bit_decode(const CudaDecode& d) {
  cuda::one_bit_decode(reinterpret_cast<const std::uint32_t*>(d.base + 8 * d.L), d.n, d.d_off, d.L,
                       reinterpret_cast<const float*>(d.base), d.weight, d.accumulate, d.o, d.stream);
}

}  // namespace

const CudaCodec one_bit_cuda_codec{.counts = true, .compress = one_bit_compress, .decode = one_bit_decode};
#else
const CudaCodec one_bit_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo one_bit_kind() {
  return {.name = "one_bit",
          .description = "1-bit signs decoded as the mean of each tensor's (or bucket's) elements on that side of 0 "
                         "(biased: pair it with error feedback)",
          .paper = "Seide, Fu, Droppo, Li, Yu 2014, 1-bit stochastic gradient descent and its application to "
                   "data-parallel distributed training of speech DNNs",
          .fields = {kBucketField},
          .codec = &one_bit_codec,
          .cuda_codec = &one_bit_cuda_codec,
          .parse = parse_bucket_settings,
          .to_json = bucket_settings_json,
          .bucket = bucket_setting};
}

}  // namespace dtsim::kernels::codecs
