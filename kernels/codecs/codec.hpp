// The codec interface: how one compressor kind encodes and decodes, selected once in the
// Compressor's constructor from the kind's registry entry (defined beside the codec). The
// Compressor does what every kind shares (argument checks, segment tables, rounds,
// payload metadata, the size check, the CPU/CUDA dispatch, error feedback's unfused
// fallback) and calls the codec for the rest: one indirect call per compress or decode.
// One file per codec (kinds that share their code share a file: sign and scaled_sign,
// fp16 and bf16). Internal to kernels/.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/compressor_spec.hpp"
#include "kernels/detail/compressor_workspace.hpp"
#include "kernels/payload.hpp"
#include "kernels/detail/torch_compat.hpp"

namespace dtsim::kernels::codecs {

using Workspace = detail::CompressorWorkspace;

// What a payload's size depends on besides the data.
struct Shape {
  std::int64_t n = 0;  // elements
  std::int64_t K = 0;  // kept elements, the sum of k_for over the tensors
  std::int64_t L = 0;  // segments (with buckets: the pieces they cut)
  std::int64_t E = 0;  // element size of the input dtype, in bytes
};

// A decompress (accumulate false: dense = decode(payload)) or decompress_add
// (accumulate: dense += weight * decode(payload)) call.
struct Decode {
  const Payload& payload;
  float weight;
  bool accumulate;
  at::Tensor& dense;
  const char* what;  // the public call's name, for messages
};

struct Codec {
  // The payload's bytes; for a kind whose size depends on the data
  // (CompressorKindInfo::size_depends_on_data), the fewest it can have.
  std::int64_t (*payload_bytes)(const CompressorSpec& spec, const Shape& shape);
  // Payload bytes per fp32 byte, for memory estimates (kernels::payload_fraction).
  double (*payload_fraction)(const CompressorSpec& spec);
  // Writes out.bytes for `flat` (contiguous, on the CPU, fp32 / fp16 / bf16) on the
  // segment tables in `ws`; out's metadata (round, segments) is already set.
  void (*compress_cpu)(const CompressorSpec& spec, Workspace& ws, const at::Tensor& flat, Payload& out);
  // Decodes a payload whose kind, dense buffer and (for fixed-size kinds) size were
  // checked, on the segment tables in `ws`.
  void (*decode_cpu)(const CompressorSpec& spec, Workspace& ws, const Decode& call);
  // Error feedback fused, on fp32 CPU buffers: memory += x; out = C(memory);
  // memory += -1 * decode(out), bit for bit those three calls. nullptr: the Compressor
  // makes the three calls (the sparse kinds, whose decode touches only k coordinates).
  void (*compress_feedback_cpu)(const CompressorSpec& spec, Workspace& ws, at::Tensor& memory, const float* x,
                                Payload& out) = nullptr;
  // For a kind whose kept counts are the data's and lead its payload (threshold): reads
  // them from the payload's first bytes (on the host) into ws.k, each checked against its
  // segment (std::invalid_argument naming `what`), and returns the byte offset of the
  // indices. nullptr: ws.k holds k_for's counts and the indices come first.
  std::int64_t (*read_counts)(Workspace& ws, const std::uint8_t* bytes, const char* what) = nullptr;
};

// out.bytes resized to `nbytes` in place when it is a 1-D contiguous uint8 tensor of its
// own on `device` (no allocation once grown), otherwise allocated.
inline void ensure_bytes(Payload& out, std::int64_t nbytes, const at::Device& device) {
  if (out.bytes.defined() && out.bytes.device() == device && out.bytes.scalar_type() == at::kByte &&
      out.bytes.dim() == 1 && out.bytes.is_contiguous() && out.bytes.storage_offset() == 0) {
    kernels::detail::resize_untracked(out.bytes, {nbytes});
  } else {
    out.bytes = at::empty({nbytes}, at::TensorOptions().dtype(at::kByte).device(device));
  }
}

// Calls f(T{}) with T the C++ type of a supported dense dtype.
template <class F>
void with_dtype(at::ScalarType t, const char* what, F&& f) {
  switch (t) {
    case at::kFloat: return f(float{});
    case at::kHalf: return f(c10::Half{});
    case at::kBFloat16: return f(c10::BFloat16{});
    default: throw std::invalid_argument(fmt::format("{}: dtype {} is not fp32, fp16 or bf16", what, c10::toString(t)));
  }
}

}  // namespace dtsim::kernels::codecs
