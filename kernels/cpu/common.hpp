// Helpers shared by the CPU compression kernels: element types, magnitude keys, the
// canonical chunked reduction order, and runtime dispatch to AVX2 code paths.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

namespace dtsim::kernels::cpu {

// Elements the kernels accept: fp32, and fp16 / bf16 where a kernel says so.
template <class T>
inline float to_float(T v) {
  return static_cast<float>(v);
}

// The magnitude of x as an unsigned key whose integer order is the order of |x|:
// the IEEE bits with the sign cleared (positive floats order like their bit patterns).
// NaN keys lie above +Inf's, so NaN ranks as the largest magnitude (as in torch::topk).
// fp16 / bf16 keys are shifted into the top bits so that every type's key has its
// exponent in bits 30..(23 or 26), which the radix select's first digit reads.
inline std::uint32_t mag_key(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  return b & 0x7FFFFFFFU;
}
inline std::uint32_t mag_key(c10::Half v) { return static_cast<std::uint32_t>(v.x & 0x7FFFU) << 16; }
inline std::uint32_t mag_key(c10::BFloat16 v) { return static_cast<std::uint32_t>(v.x & 0x7FFFU) << 16; }

// True when this CPU runs x86-64-v3 code (AVX2, FMA, F16C, BMI2): the fast paths.
// DTSIM_KERNELS_ISA=baseline (or avx2) in the environment turns them (or the AVX-512
// ones) off, so that the portable paths can be tested on any machine.
bool has_avx2();
// True when it also runs AVX-512 F/BW/DQ/VL (x86-64-v4): 16-lane paths for the kernels
// that are compute-bound at 8 lanes (QSGD's hash). Same IEEE operations, same bits.
bool has_avx512();
// Function attributes of the code paths picked at run time (the build itself stays
// x86-64 baseline): [[DTSIM_TARGET_AVX2]] void f_avx2(...).
#define DTSIM_TARGET_AVX2 gnu::target("avx2,fma,f16c,bmi2")
#if defined(__clang__)  // clang has no prefer-vector-width target attribute
#define DTSIM_TARGET_AVX512 gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi2")
#else
#define DTSIM_TARGET_AVX512 \
  gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi2,prefer-vector-width=512")
#endif

// The canonical order of a per-segment sum (of |x| or x^2), identical on CPU and GPU so
// that scales and norms, and hence the payloads, agree bit for bit:
// - the flat buffer is cut into chunks of kChunk = 1024 elements at multiples of 1024
//   (global offsets), each seen as 32 rows of 32 lanes (element 1024c + 32r + l);
// - for each (segment, chunk) pair that overlap, lane l sums its 32 elements in row
//   order, elements outside the segment counting as +0; the 32 lane sums are folded
//   as a warp reduction does (l += l + 16, then 8, 4, 2, 1);
// - a segment's chunk partials are summed pairwise level by level
//   (p[i] = p[2i] + p[2i+1], an odd last one carried up) until one is left.
constexpr std::int64_t kChunk = 1024;

// Number of (segment, chunk) partial slots for segments given by their offsets
// (offsets[0] = 0, offsets[L] = n), and the first slot of each segment in slot_begin[L+1].
std::int64_t partial_slots(const std::int64_t* offsets, std::int64_t L, std::int64_t* slot_begin);

// Folds partials[slot_begin[s] .. slot_begin[s+1]) pairwise (in place) into out[s];
// an empty segment gives 0.
void fold_partials(float* partials, const std::int64_t* slot_begin, std::int64_t L, float* out);

}  // namespace dtsim::kernels::cpu
