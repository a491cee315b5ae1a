// threshold: per segment, every element with |x| >= threshold (and NaN; cpu/select.hpp):
// L uint32 counts, then the K indices, then the K values. The size depends on the data
// (CompressorKindInfo::size_depends_on_data): payload_bytes is its header's, 4 L.
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/codecs/sparse.hpp"
#include "kernels/codecs/threshold.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/select.hpp"

namespace dtsim::kernels::codecs {

namespace {

const ThresholdSettings& settings(const CompressorSpec& spec) {
  return compressor_settings<ThresholdSettings>(spec);
}

std::int64_t payload_bytes(const CompressorSpec&, const Shape& shape) { return 4 * shape.L; }

// Assumed: at most 10 % kept, an index and a value each.
double payload_fraction(const CompressorSpec&) { return 0.2; }

void compress_cpu(const CompressorSpec& spec, Workspace& ws, const at::Tensor& flat, Payload& out) {
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  auto& k = ws.k;  // recomputed: the counts are the data's
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    constexpr std::int64_t E = sizeof(T);
    const auto t = static_cast<float>(settings(spec).threshold);
    // Counts per segment (k reused as running totals), per-part counts kept for the write.
    std::int64_t pc_total = 0;
    ws.slot_begin.resize(static_cast<std::size_t>(L) + 1);
    for (std::int64_t s = 0; s < L; ++s) {
      ws.slot_begin[s] = pc_total;
      pc_total += cpu::threshold_parts(off[s + 1] - off[s]) + 1;
    }
    ws.slot_begin[L] = pc_total;
    auto& part_counts = ws.select.part_counts;
    if (static_cast<std::int64_t>(part_counts.size()) < pc_total) part_counts.resize(pc_total);
    for (std::int64_t s = 0; s < L; ++s)
      k[s + 1] = k[s] + cpu::threshold_count(x + off[s], off[s + 1] - off[s], t, part_counts.data() + ws.slot_begin[s]);
    const std::int64_t KK = k[L];
    ensure_bytes(out, 4 * L + (4 + E) * KK, flat.device());
    auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
    auto* counts = reinterpret_cast<std::uint32_t*>(base);
    auto* idx = reinterpret_cast<std::uint32_t*>(base + 4 * L);
    T* val = reinterpret_cast<T*>(base + 4 * L + 4 * KK);
    for (std::int64_t s = 0; s < L; ++s) {
      counts[s] = static_cast<std::uint32_t>(k[s + 1] - k[s]);
      cpu::threshold_select(x + off[s], off[s + 1] - off[s], t, part_counts.data() + ws.slot_begin[s], idx + k[s],
                            val + k[s]);
    }
  });
}

// The counts leading the payload: ws.k's running totals, each checked against its segment.
std::int64_t read_counts(Workspace& ws, const std::uint8_t* bytes, const char* what) {
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  auto& k = ws.k;
  for (std::int64_t s = 0; s < L; ++s) {
    std::uint32_t count = 0;
    std::memcpy(&count, bytes + 4 * s, 4);
    if (count > static_cast<std::uint64_t>(off[s + 1] - off[s]))
      throw std::invalid_argument(
          fmt::format("{}: segment {} claims {} of its {} elements", what, s, count, off[s + 1] - off[s]));
    k[s + 1] = k[s] + count;
  }
  return 4 * L;
}

// The counts say where the indices and values are; they and the size are checked first.
void decode_cpu(const CompressorSpec&, Workspace& ws, const Decode& call) {
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  const std::int64_t indices_at = read_counts(ws, base, call.what);
  const std::int64_t K = ws.k[static_cast<std::size_t>(ws.segment_count())];
  with_dtype(call.payload.dtype, call.what, [&](auto tag) {
    using T = decltype(tag);
    constexpr std::int64_t E = sizeof(T);
    if (call.payload.bytes.numel() != indices_at + (4 + E) * K)
      throw std::invalid_argument(fmt::format("{}: threshold payload has {} bytes, its counts need {}", call.what,
                                              call.payload.bytes.numel(), indices_at + (4 + E) * K));
    scatter_segments(ws, reinterpret_cast<const std::uint32_t*>(base + indices_at),
                     reinterpret_cast<const T*>(base + indices_at + 4 * K), call);
  });
}

}  // namespace

const Codec threshold_codec{.payload_bytes = payload_bytes,
                            .payload_fraction = payload_fraction,
                            .compress_cpu = compress_cpu,
                            .decode_cpu = decode_cpu,
                            .read_counts = read_counts};

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

void threshold_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  const std::int64_t* off = c.off;
  auto& k = c.ws.k;  // recomputed: the counts are the data's
  const auto thr = static_cast<float>(compressor_settings<ThresholdSettings>(c.spec).threshold);
  std::int64_t sel = c.t.select;
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t ns = off[s + 1] - off[s];
    k[s + 1] = k[s] + cuda::threshold_count(c.x + off[s], ns, thr, c.dev + sel, c.stream);
    sel += align256(cuda::select_workspace_bytes(ns));
  }
  const std::int64_t KK = k[L];
  ensure_bytes(out, 4 * L + 8 * KK, c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  std::vector<std::uint32_t> counts(static_cast<std::size_t>(L));
  for (std::int64_t s = 0; s < L; ++s) counts[s] = static_cast<std::uint32_t>(k[s + 1] - k[s]);
  if (L > 0)
    cuda_check(cudaMemcpyAsync(base, counts.data(), static_cast<std::size_t>(4 * L), cudaMemcpyHostToDevice, c.stream),
          "Compressor::compress");
  auto* idx = reinterpret_cast<std::uint32_t*>(base + 4 * L);
  auto* val = reinterpret_cast<float*>(base + 4 * L + 4 * KK);
  sel = c.t.select;
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t ns = off[s + 1] - off[s];
    cuda::threshold_select(c.x + off[s], ns, thr, c.dev + sel, idx + k[s], val + k[s], c.stream);
    sel += align256(cuda::select_workspace_bytes(ns));
  }
  cuda_check(cudaStreamSynchronize(c.stream), "Compressor::compress");  // `counts` is pageable host memory
}

// The counts are read on the host, as the CPU decode reads them (read_counts).
void threshold_decode(const CudaDecode& d) {
  const char* what = d.accumulate ? "Compressor::decompress_add" : "Compressor::decompress";
  const std::int64_t L = d.L;
  std::vector<std::uint8_t> counts(static_cast<std::size_t>(4 * L));
  if (L > 0)
    cuda_check(cudaMemcpyAsync(counts.data(), d.base, counts.size(), cudaMemcpyDeviceToHost, d.stream), what);
  cuda_check(cudaStreamSynchronize(d.stream), what);
  const std::int64_t indices_at = read_counts(d.ws, counts.data(), what);
  const std::int64_t K = d.ws.k[static_cast<std::size_t>(L)];
  if (d.payload.bytes.numel() != indices_at + 8 * K)
    throw std::invalid_argument(fmt::format("{}: threshold payload has {} bytes, its counts need {}", what,
                                            d.payload.bytes.numel(), indices_at + 8 * K));
  scatter_segments(d, reinterpret_cast<const std::uint32_t*>(d.base + indices_at),
                   reinterpret_cast<const float*>(d.base + indices_at + 4 * K));
}

}  // namespace

const CudaCodec threshold_cuda_codec{.selects = true, .compress = threshold_compress, .decode = threshold_decode};
#else
const CudaCodec threshold_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo threshold_kind() {
  return {.name = "threshold",
          .description = "the elements with |x| >= threshold (the payload's size depends on the data)",
          .paper = "Strom 2015, Scalable distributed DNN training using commodity GPU cloud computing; "
                   "Aji, Heafield 2017, Sparse communication for distributed gradient descent",
          .fields = {{"threshold", "magnitude at or above which an element is sent"}},
          .sends_indices = true,
          .size_depends_on_data = true,
          .codec = &threshold_codec,
          .cuda_codec = &threshold_cuda_codec,
          .parse =
              [](config::ObjectReader& r, CompressorSpec& spec) {
                ThresholdSettings s;
                s.threshold = r.number("threshold", s.threshold, 0.0, config::kInf);
                if (!std::isfinite(s.threshold))  // a spec built in code: JSON has no infinities
                  throw config::ScenarioError(r.where("threshold"), config::ErrorKind::out_of_range,
                                              "expected a finite number, got infinity");
                spec.settings = s;
              },
          .to_json = [](const CompressorSpec& spec, nlohmann::json& out) { out["threshold"] = settings(spec).threshold; }};
}

}  // namespace dtsim::kernels::codecs
