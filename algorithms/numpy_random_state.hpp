// NumPy's legacy RandomState, the part PyTorch's PowerSGD hook uses: seeded with an
// integer (np.random.RandomState(seed): MT19937's init_genrand), and randint(high) for the
// default int64 result, which draws 32-bit words, masks them to the smallest 2^k - 1 at or
// above high - 1, and rejects values past it. The same seed gives the same draws as
// NumPy's, so dtsim's PowerSGD seeds its Q draws exactly as powerSGD_hook does.
#pragma once

#include <cstdint>
#include <random>
#include <stdexcept>

namespace dtsim::algorithms {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(std::uint32_t seed) : engine_(seed) {}

  // A draw from [0, high), as RandomState.randint(high); high in [1, 2^32].
  std::int64_t randint(std::int64_t high) {
    if (high < 1 || high > (std::int64_t{1} << 32)) throw std::invalid_argument("randint: high must be in [1, 2^32]");
    const std::uint64_t range = static_cast<std::uint64_t>(high) - 1;  // the largest value drawn
    if (range == 0) return 0;
    std::uint64_t mask = range;
    for (int shift = 1; shift < 64; shift <<= 1) mask |= mask >> shift;
    for (;;) {
      const std::uint64_t value = static_cast<std::uint64_t>(engine_()) & mask;
      if (value <= range) return static_cast<std::int64_t>(value);
    }
  }

 private:
  std::mt19937 engine_;  // init_genrand(seed) and genrand_int32, as NumPy's legacy MT19937
};

}  // namespace dtsim::algorithms
