// kernels::Compressor: every compressor of the CHOCO-SGD / sign-SGD / DGC family turns a
// flat buffer (the concatenation of per-tensor segments) into a real packed payload and
// back. compress() works per segment, as the reference compresses per parameter tensor
// (k per tensor, one scale or norm per tensor); payload_bits() is the exact wire size.
//
// Wire layouts (little-endian; K = total kept elements, L = segments, n = elements,
// E = element size of the input dtype, indices uint32 and local to their segment,
// increasing within it; segment blocks follow segment order):
//
//   identity     n values (E bytes each)                                  8En bits
//   fp16, bf16   n 16-bit values (input fp32)                             16n
//   top_k        K indices, K values                                      32K + 8EK
//   random_k     K indices, K values; with shared_seed K values only      32K + 8EK | 8EK
//   threshold    L uint32 counts, K indices, K values                     32L + 32K + 8EK
//   sign         ceil(n/32) uint32 words of sign bits                     32 ceil(n/32)
//   scaled_sign  L fp32 scales (||x_l||_1 / n_l), then the sign words     32L + 32 ceil(n/32)
//   qsgd         L fp32 norms, then ceil(n b / 32) uint32 words of b-bit   32L + 32 ceil(n b/32),
//                codes, b = 1 + bit_width(s) (cpu/qsgd.hpp)                 b = 3..10
//                (with `bucket` B, L counts buckets: every segment is also
//                cut at the flat buffer's multiples of B, one norm per piece)
//   one_bit      2L fp32 means (L of each piece's elements with x >= 0, then  64L + 32 ceil(n/32)
//                L of its x < 0), then the sign words (bucket: as qsgd's)
//   terngrad     L fp32 scales (max |x_l|), then ceil(n/16) uint32 words of  32L + 32 ceil(n/16)
//                2-bit codes, LSB first: 0 -> 0, 1 -> +scale, 3 -> -scale
//                (bucket: as qsgd's)
//   natural      ceil(n/32) uint32 words of sign bits, then n bytes: the     32 ceil(n/32) + 8n
//                IEEE exponent field of the rounded value (0: zero; sign
//                bit set with exponent 0: NaN; 255: Inf)
//
// so for fp32 the sign family is the reference's 32 ceil(d/32) + 32L and CHOCO's sparse
// message 64k. A payload's metadata (numel, segment sizes, round) is what a receiver
// knows without being told: the tensor shapes and the step.
//
// Semantics shared by every device (the CUDA kernels produce the same bytes):
// - k = max(1, floor(numel * ratio)) per non-empty tensor, 0 for an empty one, as the
//   reference (ratio is the fraction *kept*, the reference's 1 - compress_ratio). A
//   ratio of 0 therefore still sends one element per tensor; k = 0 is reachable only at
//   the kernel level (cpu::top_k).
// - sign(0): 0 and -0 encode as +1, on both sides (only x < 0 sets the sign bit).
// - NaN / Inf policy: nothing is checked or rejected. Top-k and threshold rank NaN above
//   +Inf (so NaN is always sent), sign treats NaN as +1, a NaN or Inf makes that
//   tensor's scaled-sign scale and QSGD norm non-finite (QSGD then decodes the whole
//   tensor to NaN), and the casts keep NaN (cpu/cast.hpp). one_bit counts NaN among
//   the x >= 0 (as sign does), so that piece's x >= 0 mean is NaN; a NaN or Inf makes a
//   TernGrad scale non-finite and its whole piece decodes to NaN (as QSGD's); natural
//   keeps NaN and +-Inf (as the casts do). NaN is NaN on both devices,
//   but its bits are outside the bit-for-bit promise: x86 arithmetic passes an input
//   NaN's bits on (and makes 0xFFC00000 of Inf - Inf), a GPU's makes one canonical NaN.
// - A sparse payload whose index lies outside its segment is refused
//   (std::invalid_argument naming it) before anything is written, on both devices.
// - Ties at the k-th magnitude go to the lowest indices.
// - Random draws (random_k indices; QSGD, TernGrad and natural rounding) are pure
//   functions of (seed, round, segment, element): identical seeds and rounds give
//   identical payloads (the segments of qsgd and terngrad cut at buckets). round counts
//   compress() calls; with shared_seed every rank must use the same seed and call
//   compress() in lockstep, and the receiver decodes with the payload's round.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/compressor_spec.hpp"
#include "kernels/detail/compressor_workspace.hpp"
#include "kernels/payload.hpp"

namespace dtsim::kernels {

class Compressor {
 public:
  // Throws std::invalid_argument naming the bad field: an unknown kind, settings of
  // another kind, or a value out of its field's range (checked_compressor_kind).
  explicit Compressor(const CompressorSpec& spec);

  const CompressorSpec& spec() const { return spec_; }
  const CompressorKindInfo& kind() const { return *info_; }
  // Elements kept of a tensor of `numel` elements (top_k, random_k: the kept share; the
  // other kinds keep them all).
  std::int64_t k_for(std::int64_t numel) const;
  // The share of each tensor kept (1 for the kinds that send every element).
  double keep_ratio() const { return keep_ratio_; }
  // The payload size in bytes for these segments and input dtype; for threshold (whose
  // size depends on the data) throws std::logic_error.
  std::int64_t payload_bytes(std::span<const std::int64_t> segments, at::ScalarType dtype) const;
  // The bits the CHOCO-SGD reference counts for fp32 segments of these sizes: the
  // payload's, or the kind's own count where the reference's differs (qsgd:
  // CompressorKindInfo::reference_bits).
  std::uint64_t reference_bits(std::span<const std::int64_t> segments) const;

  // Compresses `flat` (contiguous: fp32 on the CPU or CUDA; fp16 / bf16 on the CPU for
  // every kind but the casts) whose segments have `segment_sizes` elements (an empty
  // span: one segment). A refused call does not count as a round.
  // out.bytes is reused when it is on the right device (resized in place, so no
  // allocation once it has grown to its largest size).
  void compress(const at::Tensor& flat, std::span<const std::int64_t> segment_sizes, Payload& out);
  // dense_out (contiguous, payload.numel elements of payload.dtype, on the payload's
  // device) = decompress(payload).
  void decompress(const Payload& payload, at::Tensor& dense_out);
  // dense_inout += weight * decompress(payload), elementwise in fp32 (sparse kinds touch
  // only the sent coordinates): the gossip sum and the sparse scatter-add.
  void decompress_add(const Payload& payload, double weight, at::Tensor& dense_inout);

  // Error feedback (error_feedback.hpp): memory += x; out = C(memory);
  // memory += -1 * decompress(out). Equal, bit for bit, to those three calls; for the
  // elementwise kinds on fp32 CPU buffers (identity, sign, fp16, bf16: one pass over
  // memory; scaled_sign, qsgd: two, the scale or norm being needed before the rest) it
  // runs fused, otherwise as the three calls. memory: contiguous; x: same numel, dtype
  // and device.
  void compress_feedback(at::Tensor& memory, const at::Tensor& x, std::span<const std::int64_t> segment_sizes,
                         Payload& out);

  // What a payload of a kind that sends indices (CompressorKindInfo::sends_indices, its
  // draws not shared) says it sent, read on the host: per segment, the number of elements
  // sent, and their indices (local to their segment), segment after segment.
  // std::invalid_argument for a kind that sends none or a payload this compressor cannot
  // decode.
  struct SentIndices {
    std::vector<std::int64_t> counts;
    std::vector<std::uint32_t> indices;
  };
  SentIndices sent_indices(const Payload& payload);
  // The elements `payload` carries: k_for's over its segments, or the counts that lead it
  // (threshold, whose counts are the data's; read on the host).
  std::int64_t sent_count(const Payload& payload);

  std::uint64_t round() const { return round_; }
  void set_round(std::uint64_t r) { round_ = r; }

 private:
  void prepare_segments(std::span<const std::int64_t> sizes, std::int64_t numel, const char* what);
  void begin_payload(const at::Tensor& flat, std::span<const std::int64_t> segment_sizes, Payload& out);
  void decode(const Payload& payload, double weight, bool accumulate, at::Tensor& dense);
  // `payload` is this kind's, its bytes a contiguous uint8 tensor (std::invalid_argument
  // naming `what` otherwise).
  void check_payload(const Payload& payload, const char* what) const;
  // Sets the segment tables for `payload` and checks its size against them (for a kind
  // whose size is the data's, against its header).
  void prepare_payload(const Payload& payload, const char* what);
  // The header a payload of a kind whose size is the data's has at least (its counts).
  std::int64_t header_bytes(const Payload& payload) const;
  // The payload's leading bytes, up to `nbytes`, on the host (a view when already there).
  static at::Tensor host_bytes(const Payload& payload, std::int64_t nbytes);
#if DTSIM_TORCH_CUDA
  // std::invalid_argument when the kind has no CUDA path (compressor_cuda.cpp).
  void check_cuda_path(const char* what) const;
  void compress_cuda(const at::Tensor& flat, Payload& out);
  void decode_cuda(const Payload& payload, float weight, bool accumulate, at::Tensor& dense);
#endif

  CompressorSpec spec_;
  const CompressorKindInfo* info_ = nullptr;  // the kind's registry entry: its facts and codec
  double keep_ratio_ = 1.0;                   // read once from the settings: k_for runs per segment
  std::int64_t bucket_ = 0;
  std::uint64_t round_ = 0;
  detail::CompressorWorkspace ws_;
};

// The factory the algorithms call: validates `spec` (std::invalid_argument naming the field).
Compressor make_compressor(const CompressorSpec& spec);

}  // namespace dtsim::kernels
