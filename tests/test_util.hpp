// Helpers for tests that run the dtsim binary.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace dtsim::testing {

// Whether this dtsim has the live Gloo backend (DTSIM_TEST_HAVE_GLOO, tests/CMakeLists.txt).
// A build against a LibTorch whose Gloo headers are not to be had (PyPI's torch wheel:
// cmake/DtsimDeps.cmake) has none, and a test that starts a live CPU job of the dtsim
// binary skips there, as the CUDA cases skip without a GPU.
#ifdef DTSIM_TEST_HAVE_GLOO
inline constexpr bool kHaveGloo = DTSIM_TEST_HAVE_GLOO;
#else
inline constexpr bool kHaveGloo = true;
#endif
inline constexpr const char* kNoGloo =
    "this dtsim was built without the Gloo backend (configure says why): no live CPU job can run";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> chunk{};
  while (std::fgets(chunk.data(), chunk.size(), pipe)) result.output += chunk.data();
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

inline std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("dtsim-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

inline void write_file(const std::filesystem::path& file, const std::string& text) { std::ofstream(file) << text; }

inline std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace dtsim::testing
