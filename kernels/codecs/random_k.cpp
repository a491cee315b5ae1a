// random_k: per segment, k = max(1, floor(n ratio)) indices drawn without replacement
// from the (seed, round, segment) stream (cpu/select.hpp): K uint32 indices, then K
// values; with shared_seed every rank draws the same indices and only the values are
// sent (the receiver redraws them from the payload's round). unbiased scales the values
// by n / k.
#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/codecs/keep_ratio.hpp"
#include "kernels/codecs/random_k.hpp"
#include "kernels/codecs/sparse.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/select.hpp"
#include "kernels/cpu/sparse.hpp"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels::codecs {

namespace {

const RandomKSettings& settings(const CompressorSpec& spec) { return compressor_settings<RandomKSettings>(spec); }

std::int64_t payload_bytes(const CompressorSpec& spec, const Shape& shape) {
  return (settings(spec).shared_seed ? 0 : 4 * shape.K) + shape.E * shape.K;
}

double payload_fraction(const CompressorSpec& spec) {
  return (settings(spec).shared_seed ? 1.0 : 2.0) * settings(spec).ratio;
}

// Segment s's k indices for `round` into idx + ws.k[s], for every segment.
void draw_indices(const CompressorSpec& spec, Workspace& ws, std::uint64_t round, std::uint32_t* idx) {
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  const std::int64_t* k = ws.k.data();
  for (std::int64_t s = 0; s < L; ++s)
    cpu::random_k_indices(off[s + 1] - off[s], k[s + 1] - k[s],
                          detail::stream_key(spec.seed, round, static_cast<std::uint64_t>(s)), ws.select, idx + k[s]);
}

void compress_cpu(const CompressorSpec& spec, Workspace& ws, const at::Tensor& flat, Payload& out) {
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  const std::int64_t* k = ws.k.data();
  const std::int64_t K = k[L];
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    constexpr std::int64_t E = sizeof(T);
    const bool shared = settings(spec).shared_seed;
    ensure_bytes(out, (shared ? 0 : 4 * K) + E * K, flat.device());
    auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
    if (shared) ws.indices.resize(static_cast<std::size_t>(K));
    auto* idx = shared ? ws.indices.data() : reinterpret_cast<std::uint32_t*>(base);
    T* val = reinterpret_cast<T*>(base + (shared ? 0 : 4 * K));
    for (std::int64_t s = 0; s < L; ++s) {
      const std::int64_t ns = off[s + 1] - off[s], ks = k[s + 1] - k[s];
      cpu::random_k_indices(ns, ks, detail::stream_key(spec.seed, out.round, static_cast<std::uint64_t>(s)), ws.select,
                            idx + k[s]);
      const float scale =
          settings(spec).unbiased && ks > 0 ? static_cast<float>(static_cast<double>(ns) / static_cast<double>(ks)) : 1.0f;
      cpu::gather(x + off[s], idx + k[s], ks, scale, val + k[s]);
    }
  });
}

void decode_cpu(const CompressorSpec& spec, Workspace& ws, const Decode& call) {
  with_dtype(call.payload.dtype, call.what, [&](auto tag) {
    using T = decltype(tag);
    if (!settings(spec).shared_seed) return decode_indices_then_values<T>(ws, call);
    const std::int64_t K = ws.k[static_cast<std::size_t>(ws.segment_count())];
    ws.indices.resize(static_cast<std::size_t>(K));
    draw_indices(spec, ws, call.payload.round, ws.indices.data());
    scatter_segments(ws, ws.indices.data(), static_cast<const T*>(call.payload.bytes.data_ptr()), call);
  });
}

}  // namespace

const Codec random_k_codec{.payload_bytes = payload_bytes,
                           .payload_fraction = payload_fraction,
                           .compress_cpu = compress_cpu,
                           .decode_cpu = decode_cpu};

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

void random_k_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t K = c.K, L = c.L;
  const std::int64_t* off = c.off;
  auto& ws = c.ws;
  const auto& k = ws.k;
  const auto& r = compressor_settings<RandomKSettings>(c.spec);
  const bool shared = r.shared_seed;
  ensure_bytes(out, (shared ? 0 : 4 * K) + 4 * K, c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  ws.indices.resize(static_cast<std::size_t>(K));
  for (std::int64_t s = 0; s < L; ++s)
    cpu::random_k_indices(off[s + 1] - off[s], k[s + 1] - k[s],
                          detail::stream_key(c.spec.seed, out.round, static_cast<std::uint64_t>(s)), ws.select,
                          ws.indices.data() + k[s]);
  auto* idx = shared ? reinterpret_cast<std::uint32_t*>(c.dev + c.t.indices) : reinterpret_cast<std::uint32_t*>(base);
  auto* val = reinterpret_cast<float*>(base + (shared ? 0 : 4 * K));
  if (K > 0)
    cuda_check(cudaMemcpyAsync(idx, ws.indices.data(), static_cast<std::size_t>(4 * K), cudaMemcpyHostToDevice, c.stream),
          "Compressor::compress");
  // the host indices buffer must outlive the asynchronous copy from pageable memory
  cuda_check(cudaStreamSynchronize(c.stream), "Compressor::compress");
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t ns = off[s + 1] - off[s], ks = k[s + 1] - k[s];
    const float scale =
        r.unbiased && ks > 0 ? static_cast<float>(static_cast<double>(ns) / static_cast<double>(ks)) : 1.0f;
    cuda::gather(c.x + off[s], idx + k[s], ks, scale, val + k[s], c.stream);
  }
}

void random_k_decode(const CudaDecode& d) {
  if (!compressor_settings<RandomKSettings>(d.spec).shared_seed) return indices_then_values_decode(d);
  auto& ws = d.ws;
  const auto& k = ws.k;
  ws.indices.resize(static_cast<std::size_t>(d.K_fixed));
  for (std::int64_t s = 0; s < d.L; ++s)
    cpu::random_k_indices(d.off[s + 1] - d.off[s], k[s + 1] - k[s],
                          detail::stream_key(d.spec.seed, d.payload.round, static_cast<std::uint64_t>(s)), ws.select,
                          ws.indices.data() + k[s]);
  if (d.K_fixed > 0)
    cuda_check(cudaMemcpyAsync(d.dev + d.idx_at, ws.indices.data(), static_cast<std::size_t>(4 * d.K_fixed),
                          cudaMemcpyHostToDevice, d.stream),
          "Compressor::decompress");
  cuda_check(cudaStreamSynchronize(d.stream), "Compressor::decompress");
  scatter_segments(d, reinterpret_cast<const std::uint32_t*>(d.dev + d.idx_at), reinterpret_cast<const float*>(d.base));
}

}  // namespace

const CudaCodec random_k_cuda_codec{.compress = random_k_compress, .decode = random_k_decode};
#else
const CudaCodec random_k_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo random_k_kind() {
  return {.name = "random_k",
          .description = "keep a ratio of each tensor's elements, drawn at random",
          .paper = "Stich, Cordonnier, Jaggi 2018, Sparsified SGD with memory",
          .fields = {{"ratio", "fraction of the elements kept"},
                     {"shared_seed", "every rank draws the same coordinates, which are then not sent"},
                     {"unbiased", "scale the kept elements by numel/k (the reference never does)"}},
          .draws = true,
          .sends_indices = true,
          .codec = &random_k_codec,
          .cuda_codec = &random_k_cuda_codec,
          .parse =
              [](config::ObjectReader& r, CompressorSpec& spec) {
                RandomKSettings s;
                s.ratio = r.number("ratio", s.ratio, 0.0, 1.0);
                s.shared_seed = r.boolean("shared_seed", s.shared_seed);
                s.unbiased = r.boolean("unbiased", s.unbiased);
                spec.settings = s;
              },
          .to_json =
              [](const CompressorSpec& spec, nlohmann::json& out) {
                const auto& s = settings(spec);
                out["ratio"] = s.ratio;
                out["shared_seed"] = s.shared_seed;
                out["unbiased"] = s.unbiased;
              },
          .keep_ratio = keep_ratio_of<RandomKSettings>,
          .set_keep_ratio = set_keep_ratio_of<RandomKSettings>,
          .shares_draws = [](const CompressorSpec& spec) { return settings(spec).shared_seed; }};
}

}  // namespace dtsim::kernels::codecs
