// fp16, bf16: each fp32 value cast to a 16-bit float (round to nearest even, NaN kept;
// cpu/cast.hpp), n 16-bit values. The two kinds differ only in the conversion.
#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/cast.hpp"

namespace dtsim::kernels::codecs {

namespace {

std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) { return 2 * shape.n; }

double payload_fraction(const CompressorSpec&) { return 0.5; }

// Compressor::compress has checked that `flat` is fp32 (fp32_input_only).
template <bool half>
void compress_cpu(const CompressorSpec&, Workspace&, const at::Tensor& flat, Payload& out) {
  const std::int64_t n = flat.numel();
  ensure_bytes(out, 2 * n, flat.device());
  auto* h = static_cast<std::uint16_t*>(out.bytes.data_ptr());
  const auto* xf = static_cast<const float*>(flat.data_ptr());
  if constexpr (half)
    cpu::float_to_half(xf, n, h);
  else
    cpu::float_to_bfloat16(xf, n, h);
}

template <bool half>
void decode_cpu(const CompressorSpec&, Workspace&, const Decode& call) {
  const auto* h = static_cast<const std::uint16_t*>(call.payload.bytes.data_ptr());
  float* o = call.dense.data_ptr<float>();
  if constexpr (half)
    cpu::half_to_float(h, call.payload.numel, call.weight, call.accumulate, o);
  else
    cpu::bfloat16_to_float(h, call.payload.numel, call.weight, call.accumulate, o);
}

template <bool half>
void compress_feedback_cpu(const CompressorSpec&, Workspace&, at::Tensor& memory, const float* xp, Payload& out) {
  const std::int64_t n = memory.numel();
  float* m = memory.data_ptr<float>();
  ensure_bytes(out, 2 * n, memory.device());
  auto* h = static_cast<std::uint16_t*>(out.bytes.data_ptr());
  if constexpr (half)
    cpu::add_float_to_half_feedback(m, xp, n, h);
  else
    cpu::add_float_to_bfloat16_feedback(m, xp, n, h);
}

template <bool half>
constexpr Codec cast_codec{.payload_bytes = payload_bytes,
                           .payload_fraction = payload_fraction,
                           .compress_cpu = compress_cpu<half>,
                           .decode_cpu = decode_cpu<half>,
                           .compress_feedback_cpu = compress_feedback_cpu<half>};

}  // namespace

const Codec fp16_codec = cast_codec<true>;
const Codec bf16_codec = cast_codec<false>;

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

template <bool half>
void cast_compress(const CudaCompress& c, Payload& out) {
  ensure_bytes(out, 2 * c.n, c.device);
  auto* h = static_cast<std::uint16_t*>(out.bytes.data_ptr());
  if constexpr (half)
    cuda::float_to_half(c.x, c.n, h, c.stream);
  else
    cuda::float_to_bfloat16(c.x, c.n, h, c.stream);
}

template <bool half>
void cast_decode(const CudaDecode& d) {
  const auto* h = reinterpret_cast<const std::uint16_t*>(d.base);
  if constexpr (half)
    cuda::half_to_float(h, d.n, d.weight, d.accumulate, d.o, d.stream);
  else
    cuda::bfloat16_to_float(h, d.n, d.weight, d.accumulate, d.o, d.stream);
}

}  // namespace

const CudaCodec fp16_cuda_codec{.compress = cast_compress<true>, .decode = cast_decode<true>};
const CudaCodec bf16_cuda_codec{.compress = cast_compress<false>, .decode = cast_decode<false>};
#else
const CudaCodec fp16_cuda_codec{};
const CudaCodec bf16_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo fp16_kind() {
  return {.name = "fp16",
          .description = "16-bit IEEE half-precision floats",
          .paper = "",
          .fp32_input_only = true,
          .codec = &fp16_codec,
          .cuda_codec = &fp16_cuda_codec};
}

CompressorKindInfo bf16_kind() {
  return {.name = "bf16",
          .description = "16-bit bfloat16 floats",
          .paper = "",
          .fp32_input_only = true,
          .codec = &bf16_codec,
          .cuda_codec = &bf16_cuda_codec};
}

}  // namespace dtsim::kernels::codecs
