// qsgd: L fp32 norms, then ceil(n b / 32) uint32 words of b-bit codes, b = 1 +
// bit_width(levels) (cpu/qsgd.hpp); with tau_rescale the sent norm is CHOCO's biased
// one, with `bucket` the segments are also cut at the flat buffer's multiples of it
// (Compressor::prepare_segments), one norm per piece.
#include <ATen/Parallel.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "kernels/codecs/bucket.hpp"
#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/codecs/cuda_codec.hpp"
#include "kernels/codecs/qsgd.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/cpu/qsgd.hpp"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels::codecs {

namespace {

const QsgdSettings& settings(const CompressorSpec& spec) { return compressor_settings<QsgdSettings>(spec); }

// The reference's tau rescaling of a segment of d elements: the norm sent is
// norm / (1 + min(d / s^2, sqrt(d) / s)), s the levels.
double tau_denominator(const CompressorSpec& spec, std::int64_t elements) {
  const double d = static_cast<double>(elements), sl = settings(spec).levels;
  return std::min(d / (sl * sl), std::sqrt(d) / sl) + 1.0;
}

std::int64_t code_words_bytes(const CompressorSpec& spec, std::int64_t n) {
  return 4 * ((n * cpu::qsgd_code_bits(settings(spec).levels) + 31) / 32);
}

std::int64_t payload_bytes(const CompressorSpec& spec, const Shape& shape) {
  return 4 * shape.L + code_words_bytes(spec, shape.n);
}

double payload_fraction(const CompressorSpec& spec) { return cpu::qsgd_code_bits(settings(spec).levels) / 32.0; }

// ws.scalars[s] holds segment s's sum of squares: makes it the norm, and sets its wire
// norm (ws.scalars[L + s]) and stream key (ws.keys[s]); scalars and keys sized for every
// segment.
void finish_norm(const CompressorSpec& spec, Workspace& ws, std::int64_t s, std::uint64_t round) {
  const auto L = ws.segment_count();
  ws.scalars[s] = std::sqrt(ws.scalars[s]);
  ws.keys[s] = detail::stream_key(spec.seed, round, static_cast<std::uint64_t>(s));
  float wire = ws.scalars[s];
  if (settings(spec).tau_rescale)
    wire = static_cast<float>(static_cast<double>(wire) / tau_denominator(spec, ws.offsets[s + 1] - ws.offsets[s]));
  ws.scalars[L + s] = wire;
}

// Folds ws.partials into norms (ws.scalars[0, L)), wire norms (ws.scalars[L, 2L)) and
// the segments' stream keys (ws.keys) for `round`.
void finish_norms(const CompressorSpec& spec, Workspace& ws, std::uint64_t round) {
  const auto L = ws.segment_count();
  ws.scalars.resize(static_cast<std::size_t>(2 * L));
  cpu::fold_partials(ws.partials.data(), ws.slot_begin.data(), L, ws.scalars.data());
  ws.keys.resize(static_cast<std::size_t>(L));
  for (std::int64_t s = 0; s < L; ++s) finish_norm(spec, ws, s, round);
}

void prepare_partials(Workspace& ws) {
  const auto L = ws.segment_count();
  ws.slot_begin.resize(static_cast<std::size_t>(L) + 1);
  ws.partials.resize(static_cast<std::size_t>(cpu::partial_slots(ws.offsets.data(), L, ws.slot_begin.data())));
}

// With buckets, on the CPU: norms and codes block by block (whole buckets, in L2), one
// read of x; the same bytes as the two passes over the whole buffer.
template <class T>
void compress_buckets(const CompressorSpec& spec, Workspace& ws, const T* x, std::uint8_t* base, std::uint64_t round) {
  const std::int64_t n = ws.offsets.back();
  const auto L = ws.segment_count();
  ws.scalars.resize(static_cast<std::size_t>(2 * L));
  ws.keys.resize(static_cast<std::size_t>(L));
  const int bits = cpu::qsgd_code_bits(settings(spec).levels);
  auto* words = reinterpret_cast<std::uint32_t*>(base + 4 * L);
  // A block holds whole buckets (its ends are multiples of the bucket size, hence cuts)
  // and starts at a multiple of the canonical chunk and of 32 codes, so its sums and
  // codes are those of the whole buffer; 32 K elements stay in L2 between the two reads.
  const std::int64_t span = std::max<std::int64_t>(settings(spec).bucket, 1 << 15);
  const std::int64_t blocks = std::max<std::int64_t>(1, (n + span - 1) / span);  // one for empty tensors
  ws.blocks.resize(static_cast<std::size_t>(at::get_num_threads()));
  const auto& offsets = ws.offsets;
  at::parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    auto& bw = ws.blocks.at(static_cast<std::size_t>(at::get_thread_num()));
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t a = blk * span, b = std::min(n, a + span);
      // The block's segments: those that start in [a, b) (empty ones at b go to the next).
      const auto first = std::lower_bound(offsets.begin(), offsets.end(), a) - offsets.begin();
      const auto last = b == n ? L : std::lower_bound(offsets.begin(), offsets.end(), b) - offsets.begin();
      const std::int64_t Lb = last - first;
      bw.offsets.resize(static_cast<std::size_t>(Lb) + 1);
      for (std::int64_t s = 0; s <= Lb; ++s) bw.offsets[s] = offsets[first + s] - a;
      bw.slot_begin.resize(static_cast<std::size_t>(Lb) + 1);
      bw.partials.resize(static_cast<std::size_t>(cpu::partial_slots(bw.offsets.data(), Lb, bw.slot_begin.data())));
      cpu::sum_squares_partials(x + a, b - a, bw.offsets.data(), Lb, bw.slot_begin.data(), bw.partials.data());
      cpu::fold_partials(bw.partials.data(), bw.slot_begin.data(), Lb, ws.scalars.data() + first);
      for (std::int64_t s = first; s < last; ++s) finish_norm(spec, ws, s, round);
      cpu::qsgd_encode(x + a, b - a, bw.offsets.data(), Lb, ws.scalars.data() + first, ws.keys.data() + first,
                       settings(spec).levels, words + a * bits / 32);
    }
  });
  if (L > 0) std::memcpy(base, ws.scalars.data() + L, static_cast<std::size_t>(4 * L));
}

void compress_cpu(const CompressorSpec& spec, Workspace& ws, const at::Tensor& flat, Payload& out) {
  const std::int64_t n = flat.numel();
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    ensure_bytes(out, 4 * L + code_words_bytes(spec, n), flat.device());
    auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
    if (settings(spec).bucket > 0) return compress_buckets(spec, ws, x, base, out.round);
    prepare_partials(ws);
    cpu::sum_squares_partials(x, n, off, L, ws.slot_begin.data(), ws.partials.data());
    finish_norms(spec, ws, out.round);
    cpu::qsgd_encode(x, n, off, L, ws.scalars.data(), ws.keys.data(), settings(spec).levels,
                     reinterpret_cast<std::uint32_t*>(base + 4 * L));
    if (L > 0) std::memcpy(base, ws.scalars.data() + L, static_cast<std::size_t>(4 * L));
  });
}

void decode_cpu(const CompressorSpec& spec, Workspace& ws, const Decode& call) {
  const std::int64_t n = call.payload.numel;
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  with_dtype(call.payload.dtype, call.what, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(call.dense.data_ptr());
    ws.scalars.resize(static_cast<std::size_t>(L));
    if (L > 0) std::memcpy(ws.scalars.data(), base, static_cast<std::size_t>(4 * L));
    cpu::qsgd_decode(reinterpret_cast<const std::uint32_t*>(base + 4 * L), n, off, L, ws.scalars.data(),
                     settings(spec).levels, call.weight, call.accumulate, o);
  });
}

// Two passes: the norms of memory + x, then the codes and memory's update.
void compress_feedback_cpu(const CompressorSpec& spec, Workspace& ws, at::Tensor& memory, const float* xp,
                           Payload& out) {
  const std::int64_t n = memory.numel();
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  float* m = memory.data_ptr<float>();
  ensure_bytes(out, 4 * L + code_words_bytes(spec, n), memory.device());
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  prepare_partials(ws);
  cpu::add_sum_squares_partials(m, xp, n, off, L, ws.slot_begin.data(), ws.partials.data());
  finish_norms(spec, ws, out.round);
  cpu::qsgd_encode_feedback(m, n, off, L, ws.scalars.data(), ws.scalars.data() + L, ws.keys.data(), settings(spec).levels,
                            reinterpret_cast<std::uint32_t*>(base + 4 * L));
  if (L > 0) std::memcpy(base, ws.scalars.data() + L, static_cast<std::size_t>(4 * L));
}

}  // namespace

const Codec qsgd_codec{.payload_bytes = payload_bytes,
                       .payload_fraction = payload_fraction,
                       .compress_cpu = compress_cpu,
                       .decode_cpu = decode_cpu,
                       .compress_feedback_cpu = compress_feedback_cpu};

// The device twin (cuda_codec.hpp): the same bytes, launched on the current CUDA stream.
#if DTSIM_TORCH_CUDA
namespace {

void qsgd_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  const auto& q = settings(c.spec);
  const int bits = cpu::qsgd_code_bits(q.levels);
  ensure_bytes(out, 4 * L + 4 * ((c.n * bits + 31) / 32), c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::qsgd_encode(c.x, c.n, c.d_off, L, c.d_slot, c.slots, reinterpret_cast<const std::uint64_t*>(c.dev + c.t.keys),
                    q.levels, q.tau_rescale ? reinterpret_cast<const double*>(c.dev + c.t.segment_factors) : nullptr,
                    c.partials, reinterpret_cast<float*>(c.dev + c.t.norms), reinterpret_cast<float*>(base),
                    reinterpret_cast<std::uint32_t*>(base + 4 * L), c.stream);
}

void qsgd_decode(const CudaDecode& d) {
  cuda::qsgd_decode(reinterpret_cast<const std::uint32_t*>(d.base + 4 * d.L), d.n, d.d_off, d.L,
                    reinterpret_cast<const float*>(d.base), settings(d.spec).levels, d.weight, d.accumulate, d.o,
                    d.stream);
}

}  // namespace

const CudaCodec qsgd_cuda_codec{.segment_factor = tau_denominator, .compress = qsgd_compress, .decode = qsgd_decode};
#else
const CudaCodec qsgd_cuda_codec{};  // no CUDA in this build: CPU tensors only
#endif

CompressorKindInfo qsgd_kind() {
  return {.name = "qsgd",
          .description = "stochastic quantization to `levels` levels of each tensor's (or bucket's) norm",
          .paper = "Alistarh, Grubic, Li, Tomioka, Vojnovic 2017, QSGD",
          .fields = {{"levels", "quantization levels s"},
                     {"tau_rescale", "rescale by 1 / (1 + min(d/s^2, sqrt(d)/s)) (the reference's tau)"},
                     kBucketField},
          .draws = true,
          .codec = &qsgd_codec,
          .cuda_codec = &qsgd_cuda_codec,
          .parse =
              [](config::ObjectReader& r, CompressorSpec& spec) {
                QsgdSettings s;
                s.levels = static_cast<int>(r.integer("levels", s.levels, 2, 256));
                s.tau_rescale = r.boolean("tau_rescale", s.tau_rescale);
                s.bucket = read_bucket(r, s.bucket);
                spec.settings = s;
              },
          .to_json =
              [](const CompressorSpec& spec, nlohmann::json& out) {
                const auto& s = settings(spec);
                out["levels"] = s.levels;
                out["tau_rescale"] = s.tau_rescale;
                out["bucket"] = s.bucket;
              },
          .bucket = [](const CompressorSpec& spec) { return settings(spec).bucket; },
          // The reference counts ceil(log2(s + 1)) bits an element and no norm.
          .reference_bits =
              [](const CompressorSpec& spec, std::int64_t d) {
                return static_cast<std::uint64_t>(std::bit_width(static_cast<unsigned>(settings(spec).levels))) *
                       static_cast<std::uint64_t>(d);
              }};
}

}  // namespace dtsim::kernels::codecs
