// Counter-based random numbers shared by the CPU and CUDA kernels, so that a seeded
// compressor draws the same numbers on either device: every draw is a pure function of
// (seed, round, segment, element index), with no generator state to carry.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DTSIM_HD __host__ __device__ __forceinline__
#else
#define DTSIM_HD inline
#endif

namespace dtsim::kernels::detail {

// splitmix64's finalizer: a bijection on 64-bit words with good avalanche.
DTSIM_HD std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The key of one (seed, round, segment) stream.
DTSIM_HD std::uint64_t stream_key(std::uint64_t seed, std::uint64_t round, std::uint64_t segment) {
  return mix64(seed ^ mix64(round ^ mix64(segment ^ 0x5EED5EEDULL)));
}

// The counter step of a stream (the golden ratio in 32 bits; odd, so i -> i * step is a
// bijection).
inline constexpr std::uint32_t kStreamStep = 0x9E3779B9U;

// The generator's mixing: two xor-shift-multiply rounds (the "lowbias32" constants) with
// the key's high word xored in between. x is the element's counter value
// i * kStreamStep + (the key's low word), which a vectorized loop keeps as an induction
// variable. Two 32-bit multiplies per element: the draws are a large part of the QSGD
// encoder's work, so this is as cheap as a well-mixed 32-bit hash gets.
DTSIM_HD std::uint32_t stream_mix(std::uint32_t x, std::uint32_t key_hi) {
  x ^= x >> 16;
  x *= 0x7FEB352DU;
  x ^= (x >> 15) ^ key_hi;
  x *= 0x846CA68BU;
  x ^= x >> 16;
  return x;
}

// 32 random bits for element i (< 2^32) of a stream. For a fixed i they are a bijection of
// the key's low word, which mix64 spreads uniformly over rounds: every element's draw is
// uniform, so QSGD stays unbiased. As the step is odd, two rounds' low words always differ
// by d * step for some d; with the low word alone, one round would draw the other's
// sequence shifted by d elements. The high word, entering after the first round has mixed
// the counter, makes the two sequences unrelated.
DTSIM_HD std::uint32_t stream_bits(std::uint64_t key, std::uint32_t i) {
  return stream_mix(i * kStreamStep + static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
}

// Uniform float in [0, 1) with 24 random bits for element i (< 2^32) of a stream.
DTSIM_HD float uniform24(std::uint64_t key, std::uint32_t i) {
  return static_cast<float>(stream_bits(key, i) >> 8) * 0x1.0p-24f;
}

}  // namespace dtsim::kernels::detail
