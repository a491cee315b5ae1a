#include "kernels/compressor.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/codecs/codec.hpp"
#include "kernels/compressor_kinds.hpp"

// What every kind shares; each kind's encoding and decoding is its codec's
// (codecs/codec.hpp), found through its registry entry (compressor_kinds.cpp).

namespace dtsim::kernels {

Compressor::Compressor(const CompressorSpec& spec)
    : spec_(spec),
      info_(&checked_compressor_kind(spec)),
      keep_ratio_(info_->keeps_k() ? info_->keep_ratio(spec_) : 1.0),
      bucket_(info_->bucket ? info_->bucket(spec_) : 0) {}

Compressor make_compressor(const CompressorSpec& spec) { return Compressor(spec); }

std::int64_t Compressor::k_for(std::int64_t numel) const {
  if (numel <= 0) return 0;
  if (!info_->keeps_k()) return numel;
  const auto k = static_cast<std::int64_t>(static_cast<double>(numel) * keep_ratio_);
  return std::min(numel, std::max<std::int64_t>(1, k));
}

std::int64_t Compressor::payload_bytes(std::span<const std::int64_t> segments, at::ScalarType dtype) const {
  if (info_->size_depends_on_data)
    throw std::logic_error(
        fmt::format("Compressor::payload_bytes: a {} payload's size depends on the data", info_->name));
  codecs::Shape shape;
  for (auto s : segments) {
    // Pieces of [n, n + s) between the multiples of the bucket size (one, without buckets).
    shape.L += bucket_ > 0 && s > 0 ? (shape.n + s - 1) / bucket_ - shape.n / bucket_ + 1 : 1;
    shape.n += s;
    shape.K += k_for(s);
  }
  shape.E = static_cast<std::int64_t>(c10::elementSize(dtype));
  return info_->codec->payload_bytes(spec_, shape);
}

std::uint64_t Compressor::reference_bits(std::span<const std::int64_t> segments) const {
  if (!info_->reference_bits) return 8ULL * static_cast<std::uint64_t>(payload_bytes(segments, at::kFloat));
  std::int64_t d = 0;
  for (auto s : segments) d += s;
  return info_->reference_bits(spec_, d);
}

void Compressor::prepare_segments(std::span<const std::int64_t> sizes, std::int64_t numel, const char* what) {
  auto& offsets = ws_.offsets;
  offsets.assign(1, 0);
  if (sizes.empty()) {
    offsets.push_back(numel);
  } else {
    for (auto s : sizes) {
      if (s < 0 || s > std::int64_t{0xFFFFFFFF})
        throw std::invalid_argument(fmt::format("{}: segment size {} is not in [0, 2^32)", what, s));
      offsets.push_back(offsets.back() + s);
    }
  }
  if (offsets.back() != numel)
    throw std::invalid_argument(
        fmt::format("{}: segment sizes add up to {}, the buffer has {} elements", what, offsets.back(), numel));
  if (bucket_ > 0) {  // buckets (qsgd, one_bit, terngrad): also cut at every multiple of the bucket size
    auto& cut_offsets = ws_.bucket_offsets;
    cut_offsets.assign(1, 0);  // both vectors keep their capacity: no allocation per call
    for (std::size_t t = 0; t + 1 < offsets.size(); ++t) {
      for (std::int64_t cut = (offsets[t] / bucket_ + 1) * bucket_; cut < offsets[t + 1]; cut += bucket_)
        cut_offsets.push_back(cut);
      cut_offsets.push_back(offsets[t + 1]);
    }
    offsets.swap(cut_offsets);
  }
  const auto L = ws_.segment_count();
  auto& k = ws_.k;
  k.resize(static_cast<std::size_t>(L) + 1);
  k[0] = 0;  // running totals of kept elements: segment s's block is [k[s], k[s+1])
  for (std::int64_t s = 0; s < L; ++s) k[s + 1] = k[s] + k_for(offsets[s + 1] - offsets[s]);
}

void Compressor::compress(const at::Tensor& flat, std::span<const std::int64_t> segment_sizes, Payload& out) {
  if (!flat.defined() || !flat.is_contiguous())
    throw std::invalid_argument("Compressor::compress: flat must be a defined contiguous tensor");
  codecs::with_dtype(flat.scalar_type(), "Compressor::compress", [](auto) {});
  if (info_->fp32_input_only && flat.scalar_type() != at::kFloat)
    throw std::invalid_argument(fmt::format("Compressor::compress: {} casts fp32 input, got {}", info_->name,
                                            c10::toString(flat.scalar_type())));
  // Before begin_payload: a refused call must not use up a round (seeded payloads would
  // fall out of step with the peers').
  if (flat.is_cuda() && flat.scalar_type() != at::kFloat)
    throw std::invalid_argument("Compressor::compress: the CUDA path compresses fp32 buffers only");
#if DTSIM_TORCH_CUDA
  if (flat.is_cuda()) check_cuda_path("Compressor::compress");
#endif
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
  info_->codec->compress_cpu(spec_, ws_, flat, out);
}

void Compressor::begin_payload(const at::Tensor& flat, std::span<const std::int64_t> segment_sizes, Payload& out) {
  prepare_segments(segment_sizes, flat.numel(), "Compressor::compress");
  out.kind = info_->name;
  out.dtype = flat.scalar_type();
  out.numel = flat.numel();
  out.segments.assign(segment_sizes.begin(), segment_sizes.end());
  if (segment_sizes.empty()) out.segments.assign(1, flat.numel());
  out.round = round_++;
}

void Compressor::compress_feedback(at::Tensor& memory, const at::Tensor& x, std::span<const std::int64_t> segment_sizes,
                                   Payload& out) {
  if (!memory.defined() || !x.defined() || !memory.is_contiguous() || memory.numel() != x.numel() ||
      memory.scalar_type() != x.scalar_type() || memory.device() != x.device())
    throw std::invalid_argument("error_feedback_step: memory and x must be contiguous, same dtype, size and device");
  const auto fused = info_->codec->compress_feedback_cpu;  // the elementwise kinds have one
  const auto* mb = static_cast<const char*>(memory.data_ptr());
  const auto* xb = static_cast<const char*>(x.data_ptr());
  const std::int64_t span_bytes = 4 * memory.numel();
  const bool overlap = x.is_contiguous() && xb < mb + span_bytes && mb < xb + span_bytes;  // x aliases memory
  if (!fused || !memory.is_cpu() || memory.scalar_type() != at::kFloat || overlap) {
    // One vectorized pass, in place; a view only when the shapes differ (a view is a new
    // TensorImpl: an allocation per call).
    memory.add_(x.sizes() == memory.sizes() ? x : x.view_as(memory));
    compress(memory, segment_sizes, out);
    decompress_add(out, -1.0, memory);
    return;
  }
  const at::Tensor xc = x.is_contiguous() ? x : x.contiguous();
  begin_payload(memory, segment_sizes, out);
  fused(spec_, ws_, memory, xc.data_ptr<float>(), out);
}

void Compressor::decompress(const Payload& payload, at::Tensor& dense_out) { decode(payload, 1.0, false, dense_out); }

void Compressor::decompress_add(const Payload& payload, double weight, at::Tensor& dense_inout) {
  decode(payload, weight, true, dense_inout);
}

void Compressor::check_payload(const Payload& payload, const char* what) const {
  if (payload.kind != info_->name)
    throw std::invalid_argument(fmt::format("{}: a {} payload given to a {} compressor", what, payload.kind, info_->name));
  if (!payload.bytes.defined() || payload.bytes.scalar_type() != at::kByte || !payload.bytes.is_contiguous())
    throw std::invalid_argument(fmt::format("{}: payload bytes must be a contiguous uint8 tensor", what));
}

void Compressor::prepare_payload(const Payload& payload, const char* what) {
  prepare_segments(payload.segments, payload.numel, what);
  if (info_->size_depends_on_data) {
    // Its header, at least (the codec checks the rest against what the header says).
    if (payload.bytes.numel() < header_bytes(payload))
      throw std::invalid_argument(fmt::format("{}: {} payload too short", what, info_->name));
  } else {
    const std::int64_t expect = payload_bytes(payload.segments, payload.dtype);
    if (payload.bytes.numel() != expect)
      throw std::invalid_argument(
          fmt::format("{}: payload has {} bytes, {} expected for these segments", what, payload.bytes.numel(), expect));
  }
}

std::int64_t Compressor::header_bytes(const Payload& payload) const {
  const codecs::Shape header{
      .n = payload.numel, .L = ws_.segment_count(), .E = static_cast<std::int64_t>(c10::elementSize(payload.dtype))};
  return info_->codec->payload_bytes(spec_, header);
}

at::Tensor Compressor::host_bytes(const Payload& payload, std::int64_t nbytes) {
  return payload.bytes.narrow(0, 0, std::min(nbytes, payload.bytes.numel())).to(at::kCPU);
}

Compressor::SentIndices Compressor::sent_indices(const Payload& payload) {
  const char* what = "Compressor::sent_indices";
  if (!info_->sends_indices || (info_->shares_draws && info_->shares_draws(spec_)))
    throw std::invalid_argument(fmt::format("{}: a {} payload{} sends no indices", what, info_->name,
                                            info_->sends_indices ? " with shared draws" : ""));
  check_payload(payload, what);
  prepare_payload(payload, what);
  const at::Tensor host = host_bytes(payload, payload.bytes.numel());
  const auto* base = host.data_ptr<std::uint8_t>();
  const std::int64_t indices_at = info_->codec->read_counts ? info_->codec->read_counts(ws_, base, what) : 0;
  const auto L = ws_.segment_count();
  const std::int64_t K = ws_.k[static_cast<std::size_t>(L)];
  if (host.numel() < indices_at + 4 * K)
    throw std::invalid_argument(fmt::format("{}: {} payload too short for its {} indices", what, info_->name, K));
  SentIndices sent;
  sent.counts.resize(static_cast<std::size_t>(L));
  for (std::int64_t s = 0; s < L; ++s) sent.counts[s] = ws_.k[s + 1] - ws_.k[s];
  sent.indices.resize(static_cast<std::size_t>(K));
  std::memcpy(sent.indices.data(), base + indices_at, static_cast<std::size_t>(4 * K));
  return sent;
}

std::int64_t Compressor::sent_count(const Payload& payload) {
  const char* what = "Compressor::sent_count";
  check_payload(payload, what);
  prepare_payload(payload, what);
  if (info_->codec->read_counts) {
    const at::Tensor header = host_bytes(payload, header_bytes(payload));
    info_->codec->read_counts(ws_, header.data_ptr<std::uint8_t>(), what);
  }
  return ws_.k[static_cast<std::size_t>(ws_.segment_count())];
}

void Compressor::decode(const Payload& payload, double weight, bool accumulate, at::Tensor& dense) {
  const char* what = accumulate ? "Compressor::decompress_add" : "Compressor::decompress";
  check_payload(payload, what);
  if (!dense.defined() || !dense.is_contiguous() || dense.numel() != payload.numel ||
      dense.scalar_type() != payload.dtype || dense.device() != payload.bytes.device())
    throw std::invalid_argument(fmt::format("{}: dense must be contiguous {} with {} elements on the payload's device",
                                            what, c10::toString(payload.dtype), payload.numel));
  prepare_payload(payload, what);
  if (dense.is_cuda()) {
#if DTSIM_TORCH_CUDA
    decode_cuda(payload, static_cast<float>(weight), accumulate, dense);
    return;
#else
    throw std::invalid_argument(fmt::format("{}: CUDA tensor, but dtsim was built against a CPU LibTorch", what));
#endif
  }
  info_->codec->decode_cpu(spec_, ws_, codecs::Decode{payload, static_cast<float>(weight), accumulate, dense, what});
}

}  // namespace dtsim::kernels
