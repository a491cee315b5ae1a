// testing::python_with_torch(): the Python interpreter whose torch is the LibTorch these
// tests were built against, for the tests that hold dtsim to PyTorch's own implementations
// (torch.optim, DDP and its comm hooks, nn modules, TorchScript exports). Their figures
// agree bit for bit only within one PyTorch version: 2.15's CPU kernels (MKL) and 1.13's
// (OpenBLAS) part by an ulp here and there.
#pragma once

#include <torch/version.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/test_util.hpp"

namespace dtsim::testing {

inline std::string built_torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// The candidates in order: $DTSIM_TEST_PYTHON; the build's DTSIM_TEST_PYTHON (CMake option:
// scripts/torch2.sh passes its venv's); Debian's /usr/bin/python3 (python3-torch). The
// first whose torch.__version__, to its patch number ("1.13.0a0+git..." and "2.15.0+cu132"
// are 1.13.0 and 2.15.0), is the built LibTorch's; "" where none is (the cases skip,
// saying so). Asked once per process: importing torch takes seconds.
inline const std::string& python_with_torch() {
  static const std::string found = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("DTSIM_TEST_PYTHON"); env && *env) candidates.emplace_back(env);
#ifdef DTSIM_TEST_PYTHON
    if (std::string(DTSIM_TEST_PYTHON) != "") candidates.emplace_back(DTSIM_TEST_PYTHON);
#endif
    candidates.emplace_back("/usr/bin/python3");
    for (const auto& python : candidates) {
      const auto r = run_command(python + " -c 'import re, torch; print(\"torch\", re.match(r\"[0-9]+[.][0-9]+[.][0-9]+\", "
                                          "torch.__version__).group())'");
      if (r.exit_code == 0 && r.output.find("torch " + built_torch_version() + "\n") != std::string::npos) return python;
    }
    return std::string();
  }();
  return found;
}

// Whether a missing Python with the matching torch fails the tests against PyTorch instead
// of skipping them: DTSIM_TEST_REQUIRE_TORCH_PYTHON=1 (scripts/torch2.sh sets it, where the
// venv it made must be found).
inline bool python_with_torch_required() {
  const char* v = std::getenv("DTSIM_TEST_REQUIRE_TORCH_PYTHON");
  return v && std::string(v) == "1";
}

// Why there is none, for GTEST_SKIP (or FAIL, where required).
inline std::string no_python_with_torch() {
  return "no Python with torch " + built_torch_version() +
         " (the LibTorch these tests were built against): Debian's python3-torch for 1.13, the venv of "
         "scripts/torch2.sh for 2.x, or DTSIM_TEST_PYTHON";
}

}  // namespace dtsim::testing
