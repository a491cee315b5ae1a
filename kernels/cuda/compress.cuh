// CUDA compression and aggregation kernels: plain C++ interface (raw device pointers,
// a cudaStream_t passed as void*), so that it compiles with or without a CUDA LibTorch.
// Every kernel is the device twin of a kernels/cpu one and produces the same bytes
// (fp32 inputs; the canonical reduction order and tie rules of kernels/cpu/*.hpp). All
// launches go on `stream`; nothing synchronizes except where a function says so.
//
// Segment tables (device arrays): offsets[L + 1] (element offset of each segment),
// slot_begin[L + 1] (cpu::partial_slots), kbegin[L + 1] (running totals of kept elements).
#pragma once

#include <cstdint>

namespace dtsim::kernels::cuda {

// --- sign (cuda/sign.cu) -----------------------------------------------------------------
// Packs sign bits (x < 0) into words[ceil(n/32)]. When scales is not null, also writes
// scales[s] = (sum of |x| over segment s, canonical order) / n_s, using `partials`
// (2 * slots floats of scratch).
void pack_signs(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                const std::int64_t* slot_begin, std::int64_t slots, std::uint32_t* words, float* scales,
                float* partials, void* stream);
// out = value, or out + weight * value, value = (bit ? -1 : +1) * (scales ? scales[seg] : 1).
void decode_signs(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                  const float* scales, float weight, bool accumulate, float* out, void* stream);
// out_i = sign(sum_r (bit ? -1 : +1)); `words` is a device array of R device pointers.
void majority_vote(const std::uint32_t* const* words, int R, std::int64_t n, float* out, void* stream);

// --- QSGD (cuda/qsgd.cu) -----------------------------------------------------------------
// wire_norms[s] = norm_s, or (float)((double)norm_s / tau_denominator[s]) when
// tau_denominator is not null; codes as cpu::qsgd_encode. partials: 2 * slots floats,
// norms: L floats of scratch.
void qsgd_encode(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                 const std::int64_t* slot_begin, std::int64_t slots, const std::uint64_t* keys, int levels,
                 const double* tau_denominator, float* partials, float* norms, float* wire_norms,
                 std::uint32_t* words, void* stream);
void qsgd_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                 const float* wire_norms, int levels, float weight, bool accumulate, float* out, void* stream);

// --- one_bit, terngrad, natural (cuda/quantizers.cu) ----------------------------------------
// The formulas and wire layouts of kernels/codecs/one_bit.cpp, terngrad.cpp, natural.cpp.
// one_bit: the sign words, and means[0, L) / means[L, 2L) the per-segment means of the
// x >= 0 / x < 0 elements; partials: 2 * slots floats, counts: L words of scratch.
void one_bit_encode(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::int64_t* slot_begin, std::int64_t slots, float* partials, unsigned long long* counts,
                    float* means, std::uint32_t* words, void* stream);
void one_bit_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const float* means, float weight, bool accumulate, float* out, void* stream);
// terngrad: scales[s] = max |x| over segment s, then the 2-bit codes (16 per word) drawn
// with the segments' stream keys.
void terngrad_encode(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                     const std::uint64_t* keys, float* scales, std::uint32_t* words, void* stream);
void terngrad_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                     const float* scales, float weight, bool accumulate, float* out, void* stream);
// natural: the sign words and the n exponent bytes, drawn with the segments' stream keys.
void natural_encode(const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                    const std::uint64_t* keys, std::uint32_t* words, std::uint8_t* exponents, void* stream);
void natural_decode(const std::uint32_t* words, const std::uint8_t* exponents, std::int64_t n, float weight,
                    bool accumulate, float* out, void* stream);

// --- casts (cuda/cast.cu) ------------------------------------------------------------------
void float_to_half(const float* x, std::int64_t n, std::uint16_t* out, void* stream);
void float_to_bfloat16(const float* x, std::int64_t n, std::uint16_t* out, void* stream);
void half_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out, void* stream);
void bfloat16_to_float(const std::uint16_t* h, std::int64_t n, float weight, bool accumulate, float* out,
                       void* stream);

// --- selection (cuda/select.cu) ------------------------------------------------------------
// Scratch bytes that top_k and threshold need for n elements.
std::int64_t select_workspace_bytes(std::int64_t n);
// The k largest-magnitude elements of x[0..n) (radix select, 3 digit passes, then an
// ordered compaction): indices increasing in idx[0..k), values in val[0..k); ties at the
// k-th magnitude go to the lowest indices.
void top_k(const float* x, std::int64_t n, std::int64_t k, void* workspace, std::uint32_t* idx, float* val,
           void* stream);
// Elements with |x| >= t or NaN: counts them (synchronizes the stream to return the
// count), then threshold_select writes them as top_k does (same workspace, untouched between).
std::int64_t threshold_count(const float* x, std::int64_t n, float t, void* workspace, void* stream);
void threshold_select(const float* x, std::int64_t n, float t, void* workspace, std::uint32_t* idx, float* val,
                      void* stream);

// --- sparse and dense aggregation (cuda/sparse.cu) ------------------------------------------
// val[j] = x[idx[j]] * scale.
void gather(const float* x, const std::uint32_t* idx, std::int64_t m, float scale, float* val, void* stream);
// out[idx[j]] = val[j], or += weight * val[j]; indices distinct.
void scatter(const std::uint32_t* idx, const float* val, std::int64_t m, float weight, bool accumulate, float* out,
             void* stream);
// *first = min(*first, base + j) for every j in [0, m) whose idx[j] is outside [0, limit)
// (atomicMin on a device word the caller set to UINT64_MAX): the receivers' checks that
// run before scatter and scatter_add write anything, as the CPU checks first too.
void first_out_of_range(const std::uint32_t* idx, std::int64_t m, std::int64_t limit, std::uint64_t base,
                        unsigned long long* first, void* stream);
void first_out_of_range(const std::int64_t* idx, std::int64_t m, std::int64_t limit, std::uint64_t base,
                        unsigned long long* first, void* stream);
void first_out_of_range(const std::int32_t* idx, std::int64_t m, std::int64_t limit, std::uint64_t base,
                        unsigned long long* first, void* stream);
// dense[idx[j]] += values[j] with atomics (repeated indices: in no set order); indices
// must be in range (first_out_of_range), out-of-range ones are skipped.
void scatter_add(const float* values, const std::int64_t* idx, std::int64_t m, float* dense, std::int64_t n,
                 void* stream);
void scatter_add(const float* values, const std::int32_t* idx, std::int64_t m, float* dense, std::int64_t n,
                 void* stream);
// out[i] = out[i] + weight * v[i] (the identity payload's decompress_add).
void add_scaled(const float* v, std::int64_t n, float weight, float* out, void* stream);
// out = (in[0] + ... + in[k-1]) / k (host array of k device pointers).
void average(float* out, const float* const* in, int k, std::int64_t n, void* stream);

}  // namespace dtsim::kernels::cuda
