// A libFuzzer target for one reader (DTSIM_FUZZ_READER, e.g. scenario): the same check
// as the mutation test (tests/fuzz/readers.hpp); a broken contract aborts, so libFuzzer
// keeps the input. Built with -DDTSIM_FUZZ=ON and clang (tests/fuzz/README.md).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using dtsim::fuzz::Reader;
  const auto v = dtsim::fuzz::check(Reader::DTSIM_FUZZ_READER, {reinterpret_cast<const char*>(data), size});
  if (!v.violation.empty()) {
    std::fprintf(stderr, "dtsim fuzz: %s\n", v.violation.c_str());
    std::abort();
  }
  return 0;
}
