// CPU QSGD (Alistarh et al., 2017) stochastic quantization with s levels, per segment:
//
//   norm = ||x_seg||_2 (canonical order, common.hpp);  y = |x_i| * (s / norm)
//   level_i = floor(y) + [u_i < y - floor(y)]   (u_i = uniform24(stream_key(seed, round, seg), j))
//   decoded_i = sign(x_i) * level_i * (norm_w / s)
//
// so E[decoded_i] = x_i when norm_w = norm. Codes are `1 + bit_width(s)` bits: the level
// in the low bits, the sign (x < 0, only when level > 0) in the top bit, packed LSB first
// into a stream of 32-bit words (bit b of the stream = bit b % 32 of word b / 32).
// A segment with a non-finite norm (it holds NaN or Inf) gets all-zero codes and keeps
// its non-finite norm, so that every element of it decodes to NaN. A zero norm decodes
// to zeros.
#pragma once

#include <cstdint>

namespace dtsim::kernels::cpu {

// Bits per QSGD code for s levels.
int qsgd_code_bits(int levels);

// Canonical per-(segment, chunk) partial sums of x^2 (slot layout from partial_slots).
template <class T>
void sum_squares_partials(const T* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                          const std::int64_t* slot_begin, float* partials);

// Writes ceil(n * code_bits / 32) words of codes, given each segment's true norm (used
// for the levels) and RNG stream key.
template <class T>
void qsgd_encode(const T* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L, const float* norms,
                 const std::uint64_t* keys, int levels, std::uint32_t* words);

// decoded_i as above with norm_w = wire_norms[segment]; accumulate as in decode_signs.
template <class T>
void qsgd_decode(const std::uint32_t* words, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                 const float* wire_norms, int levels, float weight, bool accumulate, T* out);

// Error feedback (fp32), in two passes over the memory m instead of four:
// add_sum_squares_partials: m_i = m_i + x_i, and the partials of the new m (as above);
// qsgd_encode_feedback: the codes of m (as qsgd_encode), and in the same pass
// m_i = m_i + (-1) * decoded_i with norm_w = wire_norms (as qsgd_decode with weight -1).
void add_sum_squares_partials(float* m, const float* x, std::int64_t n, const std::int64_t* offsets, std::int64_t L,
                              const std::int64_t* slot_begin, float* partials);
void qsgd_encode_feedback(float* m, std::int64_t n, const std::int64_t* offsets, std::int64_t L, const float* norms,
                          const float* wire_norms, const std::uint64_t* keys, int levels, std::uint32_t* words);

}  // namespace dtsim::kernels::cpu
