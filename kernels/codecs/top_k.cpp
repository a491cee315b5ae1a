// top_k: per segment, the k = max(1, floor(n ratio)) largest magnitudes (ties to the
// lowest indices, NaN above +Inf; cpu/select.hpp): K uint32 indices, then K values.
#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/codecs/keep_ratio.hpp"
#include "kernels/codecs/sparse.hpp"
#include "kernels/codecs/top_k.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/select.hpp"

namespace dtsim::kernels::codecs {

namespace {

const TopKSettings& settings(const CompressorSpec& spec) { return compressor_settings<TopKSettings>(spec); }

std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) { return (4 + shape.E) * shape.K; }

double payload_fraction(const CompressorSpec& spec) { return 2.0 * settings(spec).ratio; }

void compress_cpu(const CompressorSpec&, Workspace& ws, const at::Tensor& flat, Payload& out) {
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  const std::int64_t* k = ws.k.data();
  const std::int64_t K = k[L];
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    constexpr std::int64_t E = sizeof(T);
    ensure_bytes(out, (4 + E) * K, flat.device());
    auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
    auto* idx = reinterpret_cast<std::uint32_t*>(base);
    T* val = reinterpret_cast<T*>(base + 4 * K);
    for (std::int64_t s = 0; s < L; ++s)
      cpu::top_k(x + off[s], off[s + 1] - off[s], k[s + 1] - k[s], ws.select, idx + k[s], val + k[s]);
  });
}

void decode_cpu(const CompressorSpec&, Workspace& ws, const Decode& call) {
  with_dtype(call.payload.dtype, call.what, [&](auto tag) { decode_indices_then_values<decltype(tag)>(ws, call); });
}

}  // namespace

const Codec top_k_codec{.payload_bytes = payload_bytes,
                        .payload_fraction = payload_fraction,
                        .compress_cpu = compress_cpu,
                        .decode_cpu = decode_cpu};

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

void top_k_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t K = c.K;
  const auto& k = c.ws.k;
  ensure_bytes(out, 8 * K, c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  auto* idx = reinterpret_cast<std::uint32_t*>(base);
  auto* val = reinterpret_cast<float*>(base + 4 * K);
  std::int64_t sel = c.t.select;
  for (std::int64_t s = 0; s < c.L; ++s) {
    const std::int64_t ns = c.off[s + 1] - c.off[s];
    cuda::top_k(c.x + c.off[s], ns, k[s + 1] - k[s], c.dev + sel, idx + k[s], val + k[s], c.stream);
    sel += align256(cuda::select_workspace_bytes(ns));
  }
}

}  // namespace

const CudaCodec top_k_cuda_codec{.selects = true, .compress = top_k_compress, .decode = indices_then_values_decode};
#else
const CudaCodec top_k_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo top_k_kind() {
  return {.name = "top_k",
          .description = "keep a ratio of each tensor's elements, the largest in magnitude",
          .paper = "Stich, Cordonnier, Jaggi 2018, Sparsified SGD with memory",
          .fields = {{"ratio", "fraction of the elements kept"}},
          .sends_indices = true,
          .codec = &top_k_codec,
          .cuda_codec = &top_k_cuda_codec,
          .parse =
              [](config::ObjectReader& r, CompressorSpec& spec) {
                TopKSettings s;
                s.ratio = r.number("ratio", s.ratio, 0.0, 1.0);
                spec.settings = s;
              },
          .to_json = [](const CompressorSpec& spec, nlohmann::json& out) { out["ratio"] = settings(spec).ratio; },
          .keep_ratio = keep_ratio_of<TopKSettings>,
          .set_keep_ratio = set_keep_ratio_of<TopKSettings>};
}

}  // namespace dtsim::kernels::codecs
