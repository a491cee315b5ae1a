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

// A 32-bit integer hash (xor-shift-multiply, two rounds); vectorizes with 32-bit lanes.
DTSIM_HD std::uint32_t hash32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352DU;
  x ^= x >> 15;
  x *= 0x846CA68BU;
  x ^= x >> 16;
  return x;
}

// The key of one (seed, round, segment) stream.
DTSIM_HD std::uint64_t stream_key(std::uint64_t seed, std::uint64_t round, std::uint64_t segment) {
  return mix64(seed ^ mix64(round ^ mix64(segment ^ 0x5EED5EEDULL)));
}

// Uniform float in [0, 1) with 24 random bits for element i (< 2^32) of a stream.
DTSIM_HD float uniform24(std::uint64_t key, std::uint32_t i) {
  const std::uint32_t h = hash32(hash32(i * 0x9E3779B9U + static_cast<std::uint32_t>(key)) ^
                                 static_cast<std::uint32_t>(key >> 32));
  return static_cast<float>(h >> 8) * 0x1.0p-24f;
}

}  // namespace dtsim::kernels::detail
