#include "kernels/compressor.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "kernels/cpu/cast.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/cpu/flatten.hpp"
#include "kernels/cpu/qsgd.hpp"
#include "kernels/cpu/select.hpp"
#include "kernels/cpu/sign.hpp"
#include "kernels/cpu/sparse.hpp"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels {

namespace {

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

void ensure_bytes(Payload& out, std::int64_t nbytes, const at::Device& device) {
  if (out.bytes.defined() && out.bytes.device() == device && out.bytes.scalar_type() == at::kByte &&
      out.bytes.dim() == 1 && out.bytes.is_contiguous() && out.bytes.storage_offset() == 0) {
    out.bytes.resize_({nbytes});
  } else {
    out.bytes = at::empty({nbytes}, at::TensorOptions().dtype(at::kByte).device(device));
  }
}

}  // namespace

std::string_view to_string(CompressorKind kind) {
  switch (kind) {
    case CompressorKind::identity: return "identity";
    case CompressorKind::top_k: return "top_k";
    case CompressorKind::random_k: return "random_k";
    case CompressorKind::threshold: return "threshold";
    case CompressorKind::sign: return "sign";
    case CompressorKind::scaled_sign: return "scaled_sign";
    case CompressorKind::qsgd: return "qsgd";
    case CompressorKind::fp16: return "fp16";
    case CompressorKind::bf16: return "bf16";
  }
  return "?";
}

Compressor::Compressor(const CompressorSpec& spec) : spec_(spec) {
  switch (spec.kind) {
    case CompressorKind::identity:
    case CompressorKind::top_k:
    case CompressorKind::random_k:
    case CompressorKind::threshold:
    case CompressorKind::sign:
    case CompressorKind::scaled_sign:
    case CompressorKind::qsgd:
    case CompressorKind::fp16:
    case CompressorKind::bf16: break;
    default: throw std::invalid_argument(fmt::format("CompressorSpec.kind: unknown value {}", static_cast<int>(spec.kind)));
  }
  if ((spec.kind == CompressorKind::top_k || spec.kind == CompressorKind::random_k) &&
      !(spec.ratio >= 0.0 && spec.ratio <= 1.0))
    throw std::invalid_argument(fmt::format("CompressorSpec.ratio: {} is not in [0, 1]", spec.ratio));
  if (spec.kind == CompressorKind::threshold && !(spec.threshold >= 0.0 && std::isfinite(spec.threshold)))
    throw std::invalid_argument(fmt::format("CompressorSpec.threshold: {} is not finite and >= 0", spec.threshold));
  if (spec.kind == CompressorKind::qsgd && (spec.levels < 2 || spec.levels > 256))
    throw std::invalid_argument(fmt::format("CompressorSpec.levels: {} is not in [2, 256]", spec.levels));
  if (spec.shared_seed && spec.kind != CompressorKind::random_k)
    throw std::invalid_argument(
        fmt::format("CompressorSpec.shared_seed: only random_k shares its seed, not {}", to_string(spec.kind)));
  if (spec.unbiased && spec.kind != CompressorKind::random_k)
    throw std::invalid_argument(
        fmt::format("CompressorSpec.unbiased: only random_k rescales (QSGD is unbiased unless tau_rescale), not {}",
                    to_string(spec.kind)));
  if (spec.tau_rescale && spec.kind != CompressorKind::qsgd)
    throw std::invalid_argument(fmt::format("CompressorSpec.tau_rescale: only qsgd rescales, not {}", to_string(spec.kind)));
  if (spec.bucket != 0 && spec.kind != CompressorKind::qsgd)
    throw std::invalid_argument(fmt::format("CompressorSpec.bucket: only qsgd has buckets, not {}", to_string(spec.kind)));
  const bool power_of_two = spec.bucket > 0 && std::has_single_bit(static_cast<std::uint64_t>(spec.bucket));
  if (spec.bucket != 0 && (!power_of_two || spec.bucket < 32 || spec.bucket > (std::int64_t{1} << 30)))
    throw std::invalid_argument(fmt::format("CompressorSpec.bucket: {} is not 0 or a power of two in [32, 2^30]", spec.bucket));
}

Compressor make_compressor(const CompressorSpec& spec) { return Compressor(spec); }

std::int64_t Compressor::k_for(std::int64_t numel) const {
  if (numel <= 0) return 0;
  if (spec_.kind != CompressorKind::top_k && spec_.kind != CompressorKind::random_k) return numel;
  const auto k = static_cast<std::int64_t>(static_cast<double>(numel) * spec_.ratio);
  return std::min(numel, std::max<std::int64_t>(1, k));
}

std::int64_t Compressor::payload_bytes(std::span<const std::int64_t> segments, at::ScalarType dtype) const {
  std::int64_t n = 0, K = 0, L = 0;
  for (auto s : segments) {
    // Pieces of [n, n + s) between the multiples of the bucket size (one, without buckets).
    L += spec_.bucket > 0 && s > 0 ? (n + s - 1) / spec_.bucket - n / spec_.bucket + 1 : 1;
    n += s;
    K += k_for(s);
  }
  const std::int64_t E = static_cast<std::int64_t>(c10::elementSize(dtype));
  switch (spec_.kind) {
    case CompressorKind::identity: return E * n;
    case CompressorKind::fp16:
    case CompressorKind::bf16: return 2 * n;
    case CompressorKind::top_k: return (4 + E) * K;
    case CompressorKind::random_k: return (spec_.shared_seed ? 0 : 4 * K) + E * K;
    case CompressorKind::threshold:
      throw std::logic_error("Compressor::payload_bytes: a threshold payload's size depends on the data");
    case CompressorKind::sign: return 4 * ((n + 31) / 32);
    case CompressorKind::scaled_sign: return 4 * L + 4 * ((n + 31) / 32);
    case CompressorKind::qsgd: return 4 * L + 4 * ((n * cpu::qsgd_code_bits(spec_.levels) + 31) / 32);
  }
  return 0;
}

void Compressor::prepare_segments(std::span<const std::int64_t> sizes, std::int64_t numel, const char* what) {
  offsets_.assign(1, 0);
  if (sizes.empty()) {
    offsets_.push_back(numel);
  } else {
    for (auto s : sizes) {
      if (s < 0 || s > std::int64_t{0xFFFFFFFF})
        throw std::invalid_argument(fmt::format("{}: segment size {} is not in [0, 2^32)", what, s));
      offsets_.push_back(offsets_.back() + s);
    }
  }
  if (offsets_.back() != numel)
    throw std::invalid_argument(
        fmt::format("{}: segment sizes add up to {}, the buffer has {} elements", what, offsets_.back(), numel));
  if (spec_.bucket > 0) {  // QSGD's buckets: also cut at every multiple of the bucket size
    bucket_offsets_.assign(1, 0);  // both vectors keep their capacity: no allocation per call
    for (std::size_t t = 0; t + 1 < offsets_.size(); ++t) {
      for (std::int64_t cut = (offsets_[t] / spec_.bucket + 1) * spec_.bucket; cut < offsets_[t + 1];
           cut += spec_.bucket)
        bucket_offsets_.push_back(cut);
      bucket_offsets_.push_back(offsets_[t + 1]);
    }
    offsets_.swap(bucket_offsets_);
  }
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  k_.resize(static_cast<std::size_t>(L) + 1);
  k_[0] = 0;  // k_ holds running totals of kept elements: segment s's block is [k_[s], k_[s+1])
  for (std::int64_t s = 0; s < L; ++s) k_[s + 1] = k_[s] + k_for(offsets_[s + 1] - offsets_[s]);
}

void Compressor::compress(const at::Tensor& flat, std::span<const std::int64_t> segment_sizes, Payload& out) {
  if (!flat.defined() || !flat.is_contiguous())
    throw std::invalid_argument("Compressor::compress: flat must be a defined contiguous tensor");
  with_dtype(flat.scalar_type(), "Compressor::compress", [](auto) {});
  if ((spec_.kind == CompressorKind::fp16 || spec_.kind == CompressorKind::bf16) && flat.scalar_type() != at::kFloat)
    throw std::invalid_argument(fmt::format("Compressor::compress: {} casts fp32 input, got {}", to_string(spec_.kind),
                                            c10::toString(flat.scalar_type())));
  // Before begin_payload: a refused call must not use up a round (seeded payloads would
  // fall out of step with the peers').
  if (flat.is_cuda() && flat.scalar_type() != at::kFloat)
    throw std::invalid_argument("Compressor::compress: the CUDA path compresses fp32 buffers only");
  begin_payload(flat, segment_sizes, out);
  if (flat.is_cuda()) {
#if DTSIM_TORCH_CUDA
    compress_cuda(flat, out);
    return;
#else
    throw std::invalid_argument("Compressor::compress: CUDA tensor, but dtsim was built against a CPU LibTorch");
#endif
  }
  if (!flat.is_cpu()) throw std::invalid_argument("Compressor::compress: flat must be on the CPU or a CUDA device");
  compress_cpu(flat, out);
}

void Compressor::begin_payload(const at::Tensor& flat, std::span<const std::int64_t> segment_sizes, Payload& out) {
  prepare_segments(segment_sizes, flat.numel(), "Compressor::compress");
  out.kind = spec_.kind;
  out.dtype = flat.scalar_type();
  out.numel = flat.numel();
  out.segments.assign(segment_sizes.begin(), segment_sizes.end());
  if (segment_sizes.empty()) out.segments.assign(1, flat.numel());
  out.round = round_++;
}

void Compressor::finish_scales(std::uint8_t* base) {
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  const std::int64_t* off = offsets_.data();
  scalars_.resize(static_cast<std::size_t>(L));
  cpu::fold_partials(partials_.data(), slot_begin_.data(), L, scalars_.data());
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t ns = off[s + 1] - off[s];
    scalars_[s] = ns > 0 ? scalars_[s] / static_cast<float>(ns) : 0.0f;
  }
  if (L > 0) std::memcpy(base, scalars_.data(), static_cast<std::size_t>(4 * L));
}

void Compressor::finish_norms(std::uint64_t round) {
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  scalars_.resize(static_cast<std::size_t>(2 * L));
  cpu::fold_partials(partials_.data(), slot_begin_.data(), L, scalars_.data());
  keys_.resize(static_cast<std::size_t>(L));
  for (std::int64_t s = 0; s < L; ++s) finish_norm(s, round);
}

void Compressor::finish_norm(std::int64_t s, std::uint64_t round) {
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  scalars_[s] = std::sqrt(scalars_[s]);
  keys_[s] = detail::stream_key(spec_.seed, round, static_cast<std::uint64_t>(s));
  float wire = scalars_[s];
  if (spec_.tau_rescale) {
    const double d = static_cast<double>(offsets_[s + 1] - offsets_[s]), sl = spec_.levels;
    wire = static_cast<float>(static_cast<double>(wire) / (std::min(d / (sl * sl), std::sqrt(d) / sl) + 1.0));
  }
  scalars_[L + s] = wire;
}

template <class T>
void Compressor::compress_qsgd_buckets(const T* x, std::uint8_t* base, std::uint64_t round) {
  const std::int64_t n = offsets_.back();
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  scalars_.resize(static_cast<std::size_t>(2 * L));
  keys_.resize(static_cast<std::size_t>(L));
  const int bits = cpu::qsgd_code_bits(spec_.levels);
  auto* words = reinterpret_cast<std::uint32_t*>(base + 4 * L);
  // A block holds whole buckets (its ends are multiples of the bucket size, hence cuts)
  // and starts at a multiple of the canonical chunk and of 32 codes, so its sums and
  // codes are those of the whole buffer; 32 K elements stay in L2 between the two reads.
  const std::int64_t span = std::max<std::int64_t>(spec_.bucket, 1 << 15);
  const std::int64_t blocks = std::max<std::int64_t>(1, (n + span - 1) / span);  // one for empty tensors
  block_ws_.resize(static_cast<std::size_t>(at::get_num_threads()));
  at::parallel_for(0, blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    auto& ws = block_ws_.at(static_cast<std::size_t>(at::get_thread_num()));
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t a = blk * span, b = std::min(n, a + span);
      // The block's segments: those that start in [a, b) (empty ones at b go to the next).
      const auto first = std::lower_bound(offsets_.begin(), offsets_.end(), a) - offsets_.begin();
      const auto last = b == n ? L : std::lower_bound(offsets_.begin(), offsets_.end(), b) - offsets_.begin();
      const std::int64_t Lb = last - first;
      ws.offsets.resize(static_cast<std::size_t>(Lb) + 1);
      for (std::int64_t s = 0; s <= Lb; ++s) ws.offsets[s] = offsets_[first + s] - a;
      ws.slot_begin.resize(static_cast<std::size_t>(Lb) + 1);
      ws.partials.resize(static_cast<std::size_t>(cpu::partial_slots(ws.offsets.data(), Lb, ws.slot_begin.data())));
      cpu::sum_squares_partials(x + a, b - a, ws.offsets.data(), Lb, ws.slot_begin.data(), ws.partials.data());
      cpu::fold_partials(ws.partials.data(), ws.slot_begin.data(), Lb, scalars_.data() + first);
      for (std::int64_t s = first; s < last; ++s) finish_norm(s, round);
      cpu::qsgd_encode(x + a, b - a, ws.offsets.data(), Lb, scalars_.data() + first, keys_.data() + first,
                       spec_.levels, words + a * bits / 32);
    }
  });
  if (L > 0) std::memcpy(base, scalars_.data() + L, static_cast<std::size_t>(4 * L));
}

void Compressor::compress_feedback(at::Tensor& memory, const at::Tensor& x, std::span<const std::int64_t> segment_sizes,
                                   Payload& out) {
  if (!memory.defined() || !x.defined() || !memory.is_contiguous() || memory.numel() != x.numel() ||
      memory.scalar_type() != x.scalar_type() || memory.device() != x.device())
    throw std::invalid_argument("error_feedback_step: memory and x must be contiguous, same dtype, size and device");
  const auto kind = spec_.kind;
  const bool elementwise = kind == CompressorKind::identity || kind == CompressorKind::sign ||
                           kind == CompressorKind::scaled_sign || kind == CompressorKind::qsgd ||
                           kind == CompressorKind::fp16 || kind == CompressorKind::bf16;
  const auto* mb = static_cast<const char*>(memory.data_ptr());
  const auto* xb = static_cast<const char*>(x.data_ptr());
  const std::int64_t span_bytes = 4 * memory.numel();
  const bool overlap = x.is_contiguous() && xb < mb + span_bytes && mb < xb + span_bytes;  // x aliases memory
  if (!elementwise || !memory.is_cpu() || memory.scalar_type() != at::kFloat || overlap) {
    // One vectorized pass, in place; a view only when the shapes differ (a view is a new
    // TensorImpl: an allocation per call).
    memory.add_(x.sizes() == memory.sizes() ? x : x.view_as(memory));
    compress(memory, segment_sizes, out);
    decompress_add(out, -1.0, memory);
    return;
  }
  const at::Tensor xc = x.is_contiguous() ? x : x.contiguous();
  begin_payload(memory, segment_sizes, out);
  const std::int64_t n = memory.numel();
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  const std::int64_t* off = offsets_.data();
  float* m = memory.data_ptr<float>();
  const float* xp = xc.data_ptr<float>();
  switch (kind) {
    case CompressorKind::identity: {
      ensure_bytes(out, 4 * n, memory.device());
      float* v = static_cast<float*>(out.bytes.data_ptr());
      at::parallel_for(0, n, 1 << 16, [&](std::int64_t a, std::int64_t b) {
        for (std::int64_t i = a; i < b; ++i) {
          const float s = m[i] + xp[i];
          v[i] = s;
          m[i] = s + -1.0f * s;
        }
      });
      return;
    }
    case CompressorKind::fp16:
    case CompressorKind::bf16: {
      ensure_bytes(out, 2 * n, memory.device());
      auto* h = static_cast<std::uint16_t*>(out.bytes.data_ptr());
      if (kind == CompressorKind::fp16)
        cpu::add_float_to_half_feedback(m, xp, n, h);
      else
        cpu::add_float_to_bfloat16_feedback(m, xp, n, h);
      return;
    }
    case CompressorKind::sign:
    case CompressorKind::scaled_sign: {
      const bool scaled = kind == CompressorKind::scaled_sign;
      ensure_bytes(out, (scaled ? 4 * L : 0) + 4 * ((n + 31) / 32), memory.device());
      auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
      auto* words = reinterpret_cast<std::uint32_t*>(base + (scaled ? 4 * L : 0));
      if (!scaled) return cpu::add_pack_signs(m, xp, n, off, L, nullptr, words, nullptr, true);
      slot_begin_.resize(static_cast<std::size_t>(L) + 1);
      partials_.resize(static_cast<std::size_t>(cpu::partial_slots(off, L, slot_begin_.data())));
      cpu::add_pack_signs(m, xp, n, off, L, slot_begin_.data(), words, partials_.data(), false);
      finish_scales(base);
      cpu::decode_signs(words, n, off, L, scalars_.data(), -1.0f, true, m);
      return;
    }
    case CompressorKind::qsgd: {
      const int bits = cpu::qsgd_code_bits(spec_.levels);
      ensure_bytes(out, 4 * L + 4 * ((n * bits + 31) / 32), memory.device());
      auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
      slot_begin_.resize(static_cast<std::size_t>(L) + 1);
      partials_.resize(static_cast<std::size_t>(cpu::partial_slots(off, L, slot_begin_.data())));
      cpu::add_sum_squares_partials(m, xp, n, off, L, slot_begin_.data(), partials_.data());
      finish_norms(out.round);
      cpu::qsgd_encode_feedback(m, n, off, L, scalars_.data(), scalars_.data() + L, keys_.data(), spec_.levels,
                                reinterpret_cast<std::uint32_t*>(base + 4 * L));
      if (L > 0) std::memcpy(base, scalars_.data() + L, static_cast<std::size_t>(4 * L));
      return;
    }
    default: return;
  }
}

void Compressor::compress_cpu(const at::Tensor& flat, Payload& out) {
  const std::int64_t n = flat.numel();
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  const std::int64_t* off = offsets_.data();
  const std::int64_t K = k_[static_cast<std::size_t>(L)];
  const auto kind = spec_.kind;
  with_dtype(flat.scalar_type(), "Compressor::compress", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(flat.data_ptr());
    constexpr std::int64_t E = sizeof(T);
    switch (kind) {
      case CompressorKind::identity: {
        ensure_bytes(out, E * n, flat.device());
        cpu::parallel_copy(out.bytes.data_ptr(), x, E * n);
        return;
      }
      case CompressorKind::fp16:
      case CompressorKind::bf16: {
        ensure_bytes(out, 2 * n, flat.device());
        auto* h = static_cast<std::uint16_t*>(out.bytes.data_ptr());
        const auto* xf = reinterpret_cast<const float*>(x);
        if (kind == CompressorKind::fp16)
          cpu::float_to_half(xf, n, h);
        else
          cpu::float_to_bfloat16(xf, n, h);
        return;
      }
      case CompressorKind::sign:
      case CompressorKind::scaled_sign: {
        const bool scaled = kind == CompressorKind::scaled_sign;
        ensure_bytes(out, (scaled ? 4 * L : 0) + 4 * ((n + 31) / 32), flat.device());
        auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
        auto* words = reinterpret_cast<std::uint32_t*>(base + (scaled ? 4 * L : 0));
        if (!scaled) return cpu::pack_signs(x, n, off, L, nullptr, words, nullptr);
        slot_begin_.resize(static_cast<std::size_t>(L) + 1);
        partials_.resize(static_cast<std::size_t>(cpu::partial_slots(off, L, slot_begin_.data())));
        cpu::pack_signs(x, n, off, L, slot_begin_.data(), words, partials_.data());
        finish_scales(base);
        return;
      }
      case CompressorKind::qsgd: {
        const int bits = cpu::qsgd_code_bits(spec_.levels);
        ensure_bytes(out, 4 * L + 4 * ((n * bits + 31) / 32), flat.device());
        auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
        if (spec_.bucket > 0) return compress_qsgd_buckets(x, base, out.round);
        slot_begin_.resize(static_cast<std::size_t>(L) + 1);
        partials_.resize(static_cast<std::size_t>(cpu::partial_slots(off, L, slot_begin_.data())));
        cpu::sum_squares_partials(x, n, off, L, slot_begin_.data(), partials_.data());
        finish_norms(out.round);
        cpu::qsgd_encode(x, n, off, L, scalars_.data(), keys_.data(), spec_.levels,
                         reinterpret_cast<std::uint32_t*>(base + 4 * L));
        if (L > 0) std::memcpy(base, scalars_.data() + L, static_cast<std::size_t>(4 * L));
        return;
      }
      case CompressorKind::top_k: {
        ensure_bytes(out, (4 + E) * K, flat.device());
        auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
        auto* idx = reinterpret_cast<std::uint32_t*>(base);
        T* val = reinterpret_cast<T*>(base + 4 * K);
        for (std::int64_t s = 0; s < L; ++s)
          cpu::top_k(x + off[s], off[s + 1] - off[s], k_[s + 1] - k_[s], select_, idx + k_[s], val + k_[s]);
        return;
      }
      case CompressorKind::random_k: {
        const bool shared = spec_.shared_seed;
        ensure_bytes(out, (shared ? 0 : 4 * K) + E * K, flat.device());
        auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
        if (shared) indices_.resize(static_cast<std::size_t>(K));
        auto* idx = shared ? indices_.data() : reinterpret_cast<std::uint32_t*>(base);
        T* val = reinterpret_cast<T*>(base + (shared ? 0 : 4 * K));
        for (std::int64_t s = 0; s < L; ++s) {
          const std::int64_t ns = off[s + 1] - off[s], ks = k_[s + 1] - k_[s];
          cpu::random_k_indices(ns, ks, detail::stream_key(spec_.seed, out.round, static_cast<std::uint64_t>(s)),
                                select_, idx + k_[s]);
          const float scale =
              spec_.unbiased && ks > 0 ? static_cast<float>(static_cast<double>(ns) / static_cast<double>(ks)) : 1.0f;
          cpu::gather(x + off[s], idx + k_[s], ks, scale, val + k_[s]);
        }
        return;
      }
      case CompressorKind::threshold: {
        const auto t = static_cast<float>(spec_.threshold);
        // Counts per segment (k_ reused as running totals), per-part counts kept for the write.
        std::int64_t pc_total = 0;
        slot_begin_.resize(static_cast<std::size_t>(L) + 1);
        for (std::int64_t s = 0; s < L; ++s) {
          slot_begin_[s] = pc_total;
          pc_total += cpu::threshold_parts(off[s + 1] - off[s]) + 1;
        }
        slot_begin_[L] = pc_total;
        if (static_cast<std::int64_t>(select_.part_counts.size()) < pc_total) select_.part_counts.resize(pc_total);
        for (std::int64_t s = 0; s < L; ++s)
          k_[s + 1] = k_[s] + cpu::threshold_count(x + off[s], off[s + 1] - off[s], t,
                                                   select_.part_counts.data() + slot_begin_[s]);
        const std::int64_t KK = k_[L];
        ensure_bytes(out, 4 * L + (4 + E) * KK, flat.device());
        auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
        auto* counts = reinterpret_cast<std::uint32_t*>(base);
        auto* idx = reinterpret_cast<std::uint32_t*>(base + 4 * L);
        T* val = reinterpret_cast<T*>(base + 4 * L + 4 * KK);
        for (std::int64_t s = 0; s < L; ++s) {
          counts[s] = static_cast<std::uint32_t>(k_[s + 1] - k_[s]);
          cpu::threshold_select(x + off[s], off[s + 1] - off[s], t, select_.part_counts.data() + slot_begin_[s],
                                idx + k_[s], val + k_[s]);
        }
        return;
      }
    }
  });
}

void Compressor::decompress(const Payload& payload, at::Tensor& dense_out) { decode(payload, 1.0, false, dense_out); }

void Compressor::decompress_add(const Payload& payload, double weight, at::Tensor& dense_inout) {
  decode(payload, weight, true, dense_inout);
}

void Compressor::decode(const Payload& payload, double weight, bool accumulate, at::Tensor& dense) {
  const char* what = accumulate ? "Compressor::decompress_add" : "Compressor::decompress";
  if (payload.kind != spec_.kind)
    throw std::invalid_argument(
        fmt::format("{}: a {} payload given to a {} compressor", what, to_string(payload.kind), to_string(spec_.kind)));
  if (!payload.bytes.defined() || payload.bytes.scalar_type() != at::kByte || !payload.bytes.is_contiguous())
    throw std::invalid_argument(fmt::format("{}: payload bytes must be a contiguous uint8 tensor", what));
  if (!dense.defined() || !dense.is_contiguous() || dense.numel() != payload.numel ||
      dense.scalar_type() != payload.dtype || dense.device() != payload.bytes.device())
    throw std::invalid_argument(fmt::format("{}: dense must be contiguous {} with {} elements on the payload's device",
                                            what, c10::toString(payload.dtype), payload.numel));
  prepare_segments(payload.segments, payload.numel, what);
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  std::int64_t expect = 0;
  if (spec_.kind == CompressorKind::threshold) {
    if (payload.bytes.numel() < 4 * L) throw std::invalid_argument(fmt::format("{}: threshold payload too short", what));
  } else {
    expect = payload_bytes(payload.segments, payload.dtype);
    if (payload.bytes.numel() != expect)
      throw std::invalid_argument(
          fmt::format("{}: payload has {} bytes, {} expected for these segments", what, payload.bytes.numel(), expect));
  }
  if (dense.is_cuda()) {
#if DTSIM_TORCH_CUDA
    decode_cuda(payload, static_cast<float>(weight), accumulate, dense);
    return;
#else
    throw std::invalid_argument(fmt::format("{}: CUDA tensor, but dtsim was built against a CPU LibTorch", what));
#endif
  }
  decode_cpu(payload, static_cast<float>(weight), accumulate, dense);
}

void Compressor::decode_cpu(const Payload& payload, float weight, bool accumulate, at::Tensor& dense) {
  const char* what = accumulate ? "Compressor::decompress_add" : "Compressor::decompress";
  const std::int64_t n = payload.numel;
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  const std::int64_t* off = offsets_.data();
  const auto* base = static_cast<const std::uint8_t*>(payload.bytes.data_ptr());
  const auto kind = spec_.kind;
  if (kind == CompressorKind::fp16 || kind == CompressorKind::bf16) {
    const auto* h = reinterpret_cast<const std::uint16_t*>(base);
    float* o = dense.data_ptr<float>();
    if (kind == CompressorKind::fp16)
      cpu::half_to_float(h, n, weight, accumulate, o);
    else
      cpu::bfloat16_to_float(h, n, weight, accumulate, o);
    return;
  }
  with_dtype(payload.dtype, what, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(dense.data_ptr());
    constexpr std::int64_t E = sizeof(T);
    switch (kind) {
      case CompressorKind::identity: {
        const T* v = reinterpret_cast<const T*>(base);
        if (!accumulate) {
          cpu::parallel_copy(o, v, E * n);
        } else {
          at::parallel_for(0, n, 1 << 16, [&](std::int64_t a, std::int64_t b) {
            for (std::int64_t i = a; i < b; ++i) o[i] = static_cast<T>(cpu::to_float(o[i]) + weight * cpu::to_float(v[i]));
          });
        }
        return;
      }
      case CompressorKind::sign:
      case CompressorKind::scaled_sign: {
        const bool scaled = kind == CompressorKind::scaled_sign;
        const auto* words = reinterpret_cast<const std::uint32_t*>(base + (scaled ? 4 * L : 0));
        if (scaled) {
          scalars_.resize(static_cast<std::size_t>(L));
          if (L > 0) std::memcpy(scalars_.data(), base, static_cast<std::size_t>(4 * L));
        }
        cpu::decode_signs(words, n, off, L, scaled ? scalars_.data() : nullptr, weight, accumulate, o);
        return;
      }
      case CompressorKind::qsgd: {
        scalars_.resize(static_cast<std::size_t>(L));
        if (L > 0) std::memcpy(scalars_.data(), base, static_cast<std::size_t>(4 * L));
        cpu::qsgd_decode(reinterpret_cast<const std::uint32_t*>(base + 4 * L), n, off, L, scalars_.data(), spec_.levels,
                         weight, accumulate, o);
        return;
      }
      case CompressorKind::top_k:
      case CompressorKind::random_k:
      case CompressorKind::threshold: {
        const std::uint32_t* idx = nullptr;
        const T* val = nullptr;
        if (kind == CompressorKind::threshold) {
          const auto* counts = reinterpret_cast<const std::uint32_t*>(base);
          for (std::int64_t s = 0; s < L; ++s) {
            if (counts[s] > static_cast<std::uint64_t>(off[s + 1] - off[s]))
              throw std::invalid_argument(fmt::format("{}: segment {} claims {} of its {} elements", what, s, counts[s],
                                                      off[s + 1] - off[s]));
            k_[s + 1] = k_[s] + counts[s];
          }
          if (payload.bytes.numel() != 4 * L + (4 + E) * k_[L])
            throw std::invalid_argument(fmt::format("{}: threshold payload has {} bytes, its counts need {}", what,
                                                    payload.bytes.numel(), 4 * L + (4 + E) * k_[L]));
          idx = reinterpret_cast<const std::uint32_t*>(base + 4 * L);
          val = reinterpret_cast<const T*>(base + 4 * L + 4 * k_[L]);
        } else if (kind == CompressorKind::random_k && spec_.shared_seed) {
          indices_.resize(static_cast<std::size_t>(k_[L]));
          for (std::int64_t s = 0; s < L; ++s)
            cpu::random_k_indices(off[s + 1] - off[s], k_[s + 1] - k_[s],
                                  detail::stream_key(spec_.seed, payload.round, static_cast<std::uint64_t>(s)), select_,
                                  indices_.data() + k_[s]);
          idx = indices_.data();
          val = reinterpret_cast<const T*>(base);
        } else {
          idx = reinterpret_cast<const std::uint32_t*>(base);
          val = reinterpret_cast<const T*>(base + 4 * k_[L]);
        }
        for (std::int64_t s = 0; s < L; ++s)
          for (std::int64_t j = k_[s]; j < k_[s + 1]; ++j)
            if (idx[j] >= static_cast<std::uint64_t>(off[s + 1] - off[s]))
              throw std::invalid_argument(fmt::format("{}: index {} out of range in segment {} of {} elements", what,
                                                      idx[j], s, off[s + 1] - off[s]));
        if (!accumulate) dense.zero_();
        for (std::int64_t s = 0; s < L; ++s)
          cpu::scatter(idx + k_[s], val + k_[s], k_[s + 1] - k_[s], weight, accumulate, o + off[s]);
        return;
      }
      case CompressorKind::fp16:
      case CompressorKind::bf16: return;
    }
  });
}

}  // namespace dtsim::kernels
