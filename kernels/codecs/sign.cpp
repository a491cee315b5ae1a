// sign: ceil(n/32) uint32 words of sign bits (x < 0 sets the bit; 0, -0 and NaN send
// +1). scaled_sign: L fp32 scales ||x_l||_1 / n_l first, then the same words, decoded
// as +-scale. The two share the packing and the decoder (cpu/sign.hpp).
#include <cstring>

#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/cpu/sign.hpp"

namespace dtsim::kernels::codecs {

namespace {

std::int64_t sign_words_bytes(std::int64_t n) { return 4 * ((n + 31) / 32); }

template <bool scaled>
std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) {
  return (scaled ? 4 * shape.L : 0) + sign_words_bytes(shape.n);
}

double payload_fraction(const CompressorSpec&) { return 1.0 / 32.0; }

// Folds ws.partials into the per-segment scales (ws.scalars), written to `base`.
void finish_scales(Workspace& ws, std::uint8_t* base) {
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  ws.scalars.resize(static_cast<std::size_t>(L));
  cpu::fold_partials(ws.partials.data(), ws.slot_begin.data(), L, ws.scalars.data());
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t ns = off[s + 1] - off[s];
    ws.scalars[s] = ns > 0 ? ws.scalars[s] / static_cast<float>(ns) : 0.0f;
  }
  if (L > 0) std::memcpy(base, ws.scalars.data(), static_cast<std::size_t>(4 * L));
}

// The scales' canonical partial sums: a slot table and its partials sized for the call.
void prepare_partials(Workspace& ws) {
  const auto L = ws.segment_count();
  ws.slot_begin.resize(static_cast<std::size_t>(L) + 1);
  ws.partials.resize(static_cast<std::size_t>(cpu::partial_slots(ws.offsets.data(), L, ws.slot_begin.data())));
}

template <bool scaled>
void compress_cpu(const CompressorSpec&, Workspace& ws, const at::Tensor& flat, Payload& out) {
  const std::int64_t n = flat.numel();
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    ensure_bytes(out, (scaled ? 4 * L : 0) + sign_words_bytes(n), flat.device());
    auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
    auto* words = reinterpret_cast<std::uint32_t*>(base + (scaled ? 4 * L : 0));
    if constexpr (!scaled) {
      cpu::pack_signs(x, n, off, L, nullptr, words, nullptr);
    } else {
      prepare_partials(ws);
      cpu::pack_signs(x, n, off, L, ws.slot_begin.data(), words, ws.partials.data());
      finish_scales(ws, base);
    }
  });
}

template <bool scaled>
void decode_cpu(const CompressorSpec&, Workspace& ws, const Decode& call) {
  const std::int64_t n = call.payload.numel;
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  with_dtype(call.payload.dtype, call.what, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(call.dense.data_ptr());
    const auto* words = reinterpret_cast<const std::uint32_t*>(base + (scaled ? 4 * L : 0));
    if (scaled) {
      ws.scalars.resize(static_cast<std::size_t>(L));
      if (L > 0) std::memcpy(ws.scalars.data(), base, static_cast<std::size_t>(4 * L));
    }
    cpu::decode_signs(words, n, off, L, scaled ? ws.scalars.data() : nullptr, call.weight, call.accumulate, o);
  });
}

// sign: one pass (pack and subtract together); scaled_sign: two, the scales being
// needed before memory can be updated.
template <bool scaled>
void compress_feedback_cpu(const CompressorSpec&, Workspace& ws, at::Tensor& memory, const float* xp, Payload& out) {
  const std::int64_t n = memory.numel();
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  float* m = memory.data_ptr<float>();
  ensure_bytes(out, (scaled ? 4 * L : 0) + sign_words_bytes(n), memory.device());
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  auto* words = reinterpret_cast<std::uint32_t*>(base + (scaled ? 4 * L : 0));
  if constexpr (!scaled) {
    cpu::add_pack_signs(m, xp, n, off, L, nullptr, words, nullptr, true);
  } else {
    prepare_partials(ws);
    cpu::add_pack_signs(m, xp, n, off, L, ws.slot_begin.data(), words, ws.partials.data(), false);
    finish_scales(ws, base);
    cpu::decode_signs(words, n, off, L, ws.scalars.data(), -1.0f, true, m);
  }
}

template <bool scaled>
constexpr Codec sign_family_codec{.payload_bytes = payload_bytes<scaled>,
                                  .payload_fraction = payload_fraction,
                                  .compress_cpu = compress_cpu<scaled>,
                                  .decode_cpu = decode_cpu<scaled>,
                                  .compress_feedback_cpu = compress_feedback_cpu<scaled>};

}  // namespace

const Codec sign_codec = sign_family_codec<false>;
const Codec scaled_sign_codec = sign_family_codec<true>;

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

template <bool scaled>
void sign_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  ensure_bytes(out, (scaled ? 4 * L : 0) + 4 * ((c.n + 31) / 32), c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::pack_signs(c.x, c.n, c.d_off, L, c.d_slot, c.slots, reinterpret_cast<std::uint32_t*>(base + (scaled ? 4 * L : 0)),
                   scaled ? reinterpret_cast<float*>(base) : nullptr, c.partials, c.stream);
}

template <bool scaled>
void sign_decode(const CudaDecode& d) {
  if constexpr (!scaled)
    cuda::decode_signs(reinterpret_cast<const std::uint32_t*>(d.base), d.n, d.d_off, d.L, nullptr, d.weight, d.accumulate,
                       d.o, d.stream);
  else
    cuda::decode_signs(reinterpret_cast<const std::uint32_t*>(d.base + 4 * d.L), d.n, d.d_off, d.L,
                       reinterpret_cast<const float*>(d.base), d.weight, d.accumulate, d.o, d.stream);
}

}  // namespace

const CudaCodec sign_cuda_codec{.compress = sign_compress<false>, .decode = sign_decode<false>};
const CudaCodec scaled_sign_cuda_codec{.compress = sign_compress<true>, .decode = sign_decode<true>};
#else
const CudaCodec sign_cuda_codec{};
const CudaCodec scaled_sign_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo sign_kind() {
  return {.name = "sign",
          .description = "1-bit signs",
          .paper = "Bernstein, Wang, Azizzadenesheli, Anandkumar 2018, signSGD",
          .codec = &sign_codec,
          .cuda_codec = &sign_cuda_codec};
}

CompressorKindInfo scaled_sign_kind() {
  return {.name = "scaled_sign",
          .description = "1-bit signs times each tensor's mean |x|",
          .paper = "Karimireddy, Rebjock, Stich, Jaggi 2019, Error feedback fixes SignSGD (EF-signSGD)",
          .codec = &scaled_sign_codec,
          .cuda_codec = &scaled_sign_cuda_codec};
}

}  // namespace dtsim::kernels::codecs
