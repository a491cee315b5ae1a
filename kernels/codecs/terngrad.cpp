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

#include "kernels/codecs/codec.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/detail/hash.hpp"
#include "kernels/detail/quantizers.hpp"

namespace dtsim::kernels::codecs {

namespace {

constexpr std::int64_t kCodesPerWord = 16;

std::int64_t code_words_bytes(std::int64_t n) { return 4 * ((n + kCodesPerWord - 1) / kCodesPerWord); }

std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) { return 4 * shape.L + code_words_bytes(shape.n); }

double payload_fraction(const CompressorSpec&) { return 2.0 / 32.0; }

// s_l for every piece into scales[0, L).
template <class T>
void piece_scales(const T* x, const std::int64_t* off, std::int64_t L, float* scales) {
  for (std::int64_t s = 0; s < L; ++s) {
    const std::uint32_t key = at::parallel_reduce(
        off[s], off[s + 1], 1 << 15, 0U,
        [&](std::int64_t i0, std::int64_t i1, std::uint32_t m) {
          for (std::int64_t i = i0; i < i1; ++i) m = std::max(m, cpu::mag_key(cpu::to_float(x[i])));
          return m;
        },
        [](std::uint32_t a, std::uint32_t b) { return std::max(a, b); });
    scales[s] = detail::bits_float(key);
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
    piece_scales(x, off, L, scales);
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
  const std::int64_t* off = ws.offsets.data();
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  const auto* scales = reinterpret_cast<const float*>(base);
  const auto* words = reinterpret_cast<const std::uint32_t*>(base + 4 * L);
  with_dtype(call.payload.dtype, call.what, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(call.dense.data_ptr());
    for (std::int64_t s = 0; s < L; ++s) {
      const float scale = scales[s];
      at::parallel_for(off[s], off[s + 1], 1 << 14, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i) {
          const std::uint32_t code = (words[i / kCodesPerWord] >> (2 * (i % kCodesPerWord))) & 3U;
          const float v = detail::terngrad_value(code, scale);
          o[i] = call.accumulate ? static_cast<T>(cpu::to_float(o[i]) + call.weight * v) : static_cast<T>(v);
        }
      });
    }
  });
}

}  // namespace

// No fused error feedback: Compressor::compress_feedback makes the three calls.
const Codec terngrad_codec{.payload_bytes = payload_bytes,
                           .payload_fraction = payload_fraction,
                           .compress_cpu = compress_cpu,
                           .decode_cpu = decode_cpu};

}  // namespace dtsim::kernels::codecs
