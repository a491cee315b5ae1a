// natural: natural compression (Horvath, Ho, Horvath, Sahu, Canini, Richtarik 2019,
// "Natural Compression for Distributed Deep Learning"). Every element is rounded
// stochastically to one of the two powers of two around it, keeping its sign:
//
//   |x_i| in [2^a, 2^(a+1)):  C(x_i) = sign(x_i) 2^a      with probability (2^(a+1) - |x_i|) / 2^a
//                                      sign(x_i) 2^(a+1)  otherwise
//   C(0) = 0
//
// so E[C(x_i)] = x_i. The draw is u_i = uniform24(stream_key(seed, round, l), i - offset_l)
// for element i of tensor l (kernels/detail/hash.hpp); fp32's edges (subnormals, the top
// binade, Inf, NaN) and the code are detail/quantizers.hpp's. fp16 / bf16 input is rounded
// as its fp32 value and decoded back to its dtype (fp16's top binade then rounds up to Inf).
//
// Wire, 9 bits per element as the paper counts them: ceil(n/32) uint32 words of sign
// bits (bit i % 32 of word i / 32), then n bytes, the exponent fields of the rounded
// values (byte i for element i).
#include <ATen/Parallel.h>

#include <algorithm>

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

std::int64_t sign_words_bytes(std::int64_t n) { return 4 * ((n + 31) / 32); }

std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) { return sign_words_bytes(shape.n) + shape.n; }

double payload_fraction(const CompressorSpec&) { return 9.0 / 32.0; }

void compress_cpu(const CompressorSpec& spec, Workspace& ws, const at::Tensor& flat, Payload& out) {
  const std::int64_t n = flat.numel();
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    ensure_bytes(out, sign_words_bytes(n) + n, flat.device());
    auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
    auto* words = reinterpret_cast<std::uint32_t*>(base);
    std::uint8_t* exponents = base + sign_words_bytes(n);
    ws.keys.resize(static_cast<std::size_t>(L));
    for (std::int64_t s = 0; s < L; ++s) ws.keys[s] = detail::stream_key(spec.seed, out.round, static_cast<std::uint64_t>(s));
    at::parallel_for(0, (n + 31) / 32, 512, [&](std::int64_t w0, std::int64_t w1) {
      std::int64_t s = std::upper_bound(off, off + L + 1, 32 * w0) - off - 1;
      for (std::int64_t w = w0; w < w1; ++w) {
        std::uint32_t signs = 0;
        for (std::int64_t j = 0; j < 32 && 32 * w + j < n; ++j) {
          const std::int64_t i = 32 * w + j;
          while (off[s + 1] <= i) ++s;
          const float u = detail::uniform24(ws.keys[s], static_cast<std::uint32_t>(i - off[s]));
          const detail::NaturalCode code = detail::natural_code(cpu::to_float(x[i]), u);
          signs |= code.negative << j;
          exponents[i] = static_cast<std::uint8_t>(code.exponent);
        }
        words[w] = signs;
      }
    });
  });
}

void decode_cpu(const CompressorSpec&, Workspace&, const Decode& call) {
  const std::int64_t n = call.payload.numel;
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  const auto* words = reinterpret_cast<const std::uint32_t*>(base);
  const std::uint8_t* exponents = base + sign_words_bytes(n);
  decode_each(call, [&](std::int64_t i) {
    return detail::natural_value((words[i / 32] >> (i % 32)) & 1U, exponents[i]);
  });
}

}  // namespace

// No fused error feedback: Compressor::compress_feedback makes the three calls.
const Codec natural_codec{.payload_bytes = payload_bytes,
                          .payload_fraction = payload_fraction,
                          .compress_cpu = compress_cpu,
                          .decode_cpu = decode_cpu};

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

void natural_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t sign_bytes = 4 * ((c.n + 31) / 32);
  ensure_bytes(out, sign_bytes + c.n, c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::natural_encode(c.x, c.n, c.d_off, c.L, reinterpret_cast<const std::uint64_t*>(c.dev + c.t.keys),
                       reinterpret_cast<std::uint32_t*>(base), base + sign_bytes, c.stream);
}

void natural_decode(const CudaDecode& d) {
  cuda::natural_decode(reinterpret_cast<const std::uint32_t*>(d.base), d.base + 4 * ((d.n + 31) / 32), d.n, d.weight,
                       d.accumulate, d.o, d.stream);
}

}  // namespace

const CudaCodec natural_cuda_codec{.compress = natural_compress, .decode = natural_decode};
#else
const CudaCodec natural_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo natural_kind() {
  return {.name = "natural",
          .description = "stochastic rounding of each element to a power of two, sent as sign and 8-bit exponent "
                         "(unbiased)",
          .paper = "Horvath, Ho, Horvath, Sahu, Canini, Richtarik 2019, Natural compression for distributed deep learning",
          .draws = true,
          .codec = &natural_codec,
          .cuda_codec = &natural_cuda_codec};
}

}  // namespace dtsim::kernels::codecs
