// Deterministic mutations of reader inputs, from a seeded generator: the same seed gives
// the same inputs on every machine (no std:: distributions, whose output the standard
// leaves to the library).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/readers.hpp"

namespace dtsim::fuzz {

// splitmix64.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  std::uint64_t state_;
};

// One mutated input for `reader`, derived from `seed` (and `donors`, other inputs of the
// same reader that spans and values are spliced from). Mutations stack (one to four):
// byte flips, interesting bytes, truncation, deleted / duplicated / spliced spans, and
// per format: JSON values replaced by another type, huge / negative / tiny numbers,
// nesting tens of thousands of levels deep, empty arrays and objects, unknown keys, very
// long strings; MessagePack headers with huge lengths and deep nesting; LIBSVM tokens;
// IDX headers; command-line arguments.
// `trusted` says that `seed` is one of the seeds (shallow, well-formed): MessagePack is
// decoded for value-level changes only then, since nlohmann's MessagePack reader (which
// the harness uses too) recurses per level and an earlier mutation may be deep.
std::string mutate(Reader reader, const std::string& seed, bool trusted, const std::vector<std::string>& donors,
                   Rng& rng);

}  // namespace dtsim::fuzz
