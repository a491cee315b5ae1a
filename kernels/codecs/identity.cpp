// identity: the values as they are (n values of the input dtype).
#include <ATen/Parallel.h>

#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/cpu/flatten.hpp"

namespace dtsim::kernels::codecs {

namespace {

std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) { return shape.E * shape.n; }

double payload_fraction(const CompressorSpec&) { return 1.0; }

void compress_cpu(const CompressorSpec&, Workspace&, const at::Tensor& flat, Payload& out) {
  const std::int64_t n = flat.numel();
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    constexpr std::int64_t E = sizeof(T);
    ensure_bytes(out, E * n, flat.device());
    cpu::parallel_copy(out.bytes.data_ptr(), x, E * n);
  });
}

void decode_cpu(const CompressorSpec&, Workspace&, const Decode& call) {
  const std::int64_t n = call.payload.numel;
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  const float weight = call.weight;
  with_dtype(call.payload.dtype, call.what, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(call.dense.data_ptr());
    constexpr std::int64_t E = sizeof(T);
    const T* v = reinterpret_cast<const T*>(base);
    if (!call.accumulate) {
      cpu::parallel_copy(o, v, E * n);
    } else {
      at::parallel_for(0, n, 1 << 16, [&](std::int64_t a, std::int64_t b) {
        for (std::int64_t i = a; i < b; ++i) o[i] = static_cast<T>(cpu::to_float(o[i]) + weight * cpu::to_float(v[i]));
      });
    }
  });
}

// One pass: the payload is memory + x, and memory keeps its rounding error, s + -1 * s.
void compress_feedback_cpu(const CompressorSpec&, Workspace&, at::Tensor& memory, const float* xp, Payload& out) {
  const std::int64_t n = memory.numel();
  float* m = memory.data_ptr<float>();
  ensure_bytes(out, 4 * n, memory.device());
  float* v = static_cast<float*>(out.bytes.data_ptr());
  at::parallel_for(0, n, 1 << 16, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t i = a; i < b; ++i) {
      const float s = m[i] + xp[i];
      v[i] = s;
      m[i] = s + -1.0f * s;
    }
  });
}

}  // namespace

const Codec identity_codec{.payload_bytes = payload_bytes,
                           .payload_fraction = payload_fraction,
                           .compress_cpu = compress_cpu,
                           .decode_cpu = decode_cpu,
                           .compress_feedback_cpu = compress_feedback_cpu};

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

void identity_compress(const CudaCompress& c, Payload& out) {
  ensure_bytes(out, 4 * c.n, c.device);
  if (c.n > 0)
    cuda_check(cudaMemcpyAsync(out.bytes.data_ptr(), c.x, static_cast<std::size_t>(4 * c.n), cudaMemcpyDeviceToDevice,
                          c.stream),
          "Compressor::compress");
}

void identity_decode(const CudaDecode& d) {
  if (d.accumulate)
    cuda::add_scaled(reinterpret_cast<const float*>(d.base), d.n, d.weight, d.o, d.stream);
  else if (d.n > 0)
    cuda_check(cudaMemcpyAsync(d.o, d.base, static_cast<std::size_t>(4 * d.n), cudaMemcpyDeviceToDevice, d.stream),
          "Compressor::decompress");
}

}  // namespace

const CudaCodec identity_cuda_codec{.compress = identity_compress, .decode = identity_decode};
#else
const CudaCodec identity_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo identity_kind() {
  return {.name = "identity",
          .description = "no compression: the values as they are",
          .paper = "",
          .codec = &identity_codec,
          .cuda_codec = &identity_cuda_codec};
}

}  // namespace dtsim::kernels::codecs
