// terngrad: TernGrad (Wen, Xu, Yan, Wu, Wang, Chen, Li, NeurIPS 2017). Per piece l (a
// tensor, or with `bucket` B a bucket of it: the tensors also cut at the flat buffer's
// multiples of B, as qsgd's):
//
//   s_l = max_{i in l} |x_i|
//   decoded_i = s_l * sign(x_i) * b_i,   b_i ~ Bernoulli(|x_i| / s_l)
//
// so E[decoded_i] = x_i. b_i = [u_i < |x_i| / s_l] with u_i = uniform24(stream_key(seed,
// round, l), i - offset_l), QSGD's draws (kernels/detail/hash.hpp). s_l = 0 sends zeros;
// a NaN or Inf in the piece makes s_l non-finite and the whole piece decodes to NaN
// (detail/quantizers.hpp). The max is taken on the magnitude keys (cpu/common.hpp), in
// which NaN ranks above Inf and which any order of reduction gives alike.
//
// Wire: L fp32 scales s_l, then ceil(n/16) uint32 words of 2-bit codes (element i at
// bits 2(i % 16) of word i / 16; 0: 0, 1: +s, 3: -s).
#include <ATen/Parallel.h>

#include <algorithm>

#include "kernels/codecs/bucket.hpp"
#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/codecs/decode_each.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/detail/hash.hpp"
#include "kernels/detail/quantizers.hpp"

namespace dtsim::kernels::codecs {

namespace {

using cpu::kChunk;
constexpr std::int64_t kCodesPerWord = 16;

std::int64_t code_words_bytes(std::int64_t n) { return 4 * ((n + kCodesPerWord - 1) / kCodesPerWord); }

std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) { return 4 * shape.L + code_words_bytes(shape.n); }

double payload_fraction(const CompressorSpec&) { return 2.0 / 32.0; }

// s_l for every piece into scales[0, L): the largest magnitude key of each (piece,
// 1024-element chunk) pair (slot layout of cpu::partial_slots), in parallel over the
// chunks, then of each piece's slots, so that buckets of any size share the work out.
template <class T>
void piece_scales(const T* x, std::int64_t n, const std::int64_t* off, std::int64_t L, Workspace& ws, float* scales) {
  ws.slot_begin.resize(static_cast<std::size_t>(L) + 1);
  ws.max_keys.resize(static_cast<std::size_t>(cpu::partial_slots(off, L, ws.slot_begin.data())));
  const std::int64_t* slot_begin = ws.slot_begin.data();
  std::uint32_t* max_keys = ws.max_keys.data();
  at::parallel_for(0, (n + kChunk - 1) / kChunk, 16, [&](std::int64_t c0, std::int64_t c1) {
    std::int64_t s = std::upper_bound(off, off + L + 1, c0 * kChunk) - off - 1;
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t base = c * kChunk, end = std::min(n, base + kChunk);
      while (s < L && off[s + 1] <= base) ++s;
      for (std::int64_t t = s; t < L && off[t] < end; ++t) {
        const std::int64_t a = std::max(off[t], base), b = std::min(off[t + 1], end);
        if (b <= a) continue;
        std::uint32_t m = 0;
        for (std::int64_t i = a; i < b; ++i) m = std::max(m, cpu::mag_key(cpu::to_float(x[i])));
        max_keys[slot_begin[t] + c - off[t] / kChunk] = m;
      }
    }
  });
  for (std::int64_t s = 0; s < L; ++s) {
    std::uint32_t m = 0;  // an empty piece: scale 0
    for (std::int64_t slot = slot_begin[s]; slot < slot_begin[s + 1]; ++slot) m = std::max(m, max_keys[slot]);
    scales[s] = detail::bits_float(m);
  }
}

void compress_cpu(const CompressorSpec& spec, Workspace& ws, const at::Tensor& flat, Payload& out) {
  const std::int64_t n = flat.numel();
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    ensure_bytes(out, 4 * L + code_words_bytes(n), flat.device());
    auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
    auto* scales = reinterpret_cast<float*>(base);
    auto* words = reinterpret_cast<std::uint32_t*>(base + 4 * L);
    piece_scales(x, n, off, L, ws, scales);
    ws.keys.resize(static_cast<std::size_t>(L));
    for (std::int64_t s = 0; s < L; ++s) ws.keys[s] = detail::stream_key(spec.seed, out.round, static_cast<std::uint64_t>(s));
    const std::int64_t W = (n + kCodesPerWord - 1) / kCodesPerWord;
    at::parallel_for(0, W, 1024, [&](std::int64_t w0, std::int64_t w1) {
      std::int64_t s = std::upper_bound(off, off + L + 1, w0 * kCodesPerWord) - off - 1;
      for (std::int64_t w = w0; w < w1; ++w) {
        std::uint32_t word = 0;
        for (std::int64_t j = 0; j < kCodesPerWord && kCodesPerWord * w + j < n; ++j) {
          const std::int64_t i = kCodesPerWord * w + j;
          while (off[s + 1] <= i) ++s;
          const float u = detail::uniform24(ws.keys[s], static_cast<std::uint32_t>(i - off[s]));
          word |= detail::terngrad_code(cpu::to_float(x[i]), scales[s], u) << (2 * j);
        }
        words[w] = word;
      }
    });
  });
}

void decode_cpu(const CompressorSpec&, Workspace& ws, const Decode& call) {
  const auto L = ws.segment_count();
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  const auto* scales = reinterpret_cast<const float*>(base);
  const auto* words = reinterpret_cast<const std::uint32_t*>(base + 4 * L);
  decode_each_in_segment(ws, call, [&](std::int64_t i, std::int64_t s) {
    const std::uint32_t code = (words[i / kCodesPerWord] >> (2 * (i % kCodesPerWord))) & 3U;
    return detail::terngrad_value(code, scales[s]);
  });
}

}  // namespace

// No fused error feedback: Compressor::compress_feedback makes the three calls.
const Codec terngrad_codec{.payload_bytes = payload_bytes,
                           .payload_fraction = payload_fraction,
                           .compress_cpu = compress_cpu,
                           .decode_cpu = decode_cpu};

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

void terngrad_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  ensure_bytes(out, 4 * L + 4 * ((c.n + 15) / 16), c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::terngrad_encode(c.x, c.n, c.d_off, L, reinterpret_cast<const std::uint64_t*>(c.dev + c.t.keys),
                        reinterpret_cast<float*>(base), reinterpret_cast<std::uint32_t*>(base + 4 * L), c.stream);
}

void terngrad_decode(const CudaDecode& d) {
  cuda::terngrad_decode(reinterpret_cast<const std::uint32_t*>(d.base + 4 * d.L), d.n, d.d_off, d.L,
                        reinterpret_cast<const float*>(d.base), d.weight, d.accumulate, d.o, d.stream);
}

}  // namespace

const CudaCodec terngrad_cuda_codec{.compress = terngrad_compress, .decode = terngrad_decode};
#else
const CudaCodec terngrad_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo terngrad_kind() {
  return {.name = "terngrad",
          .description = "stochastic ternary levels {-s, 0, +s}, s each tensor's (or bucket's) max |x| (unbiased)",
          .paper = "Wen, Xu, Yan, Wu, Wang, Chen, Li 2017, TernGrad: ternary gradients to reduce communication in "
                   "distributed deep learning",
          .fields = {kBucketField},
          .draws = true,
          .codec = &terngrad_codec,
          .cuda_codec = &terngrad_cuda_codec,
          .parse = parse_bucket_settings,
          .to_json = bucket_settings_json,
          .bucket = bucket_setting};
}

}  // namespace dtsim::kernels::codecs
