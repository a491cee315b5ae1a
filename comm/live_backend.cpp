#include "comm/live_backend.hpp"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/gloo.hpp"
#include "comm/nccl.hpp"

namespace dtsim::comm {

std::span<const LiveBackend> live_backends() {
  static const LiveBackend table[] = {
      {.name = "gloo",
       .description = "CPU tensors",
       .make = make_gloo_communicator,
       .available = gloo_available,
       .on_gpu = false},
      {.name = "nccl",
       .description = "CUDA tensors on GPU LOCAL_RANK; a CUDA build",
       .make = make_nccl_communicator,
       .available = nccl_available,
       .on_gpu = true},
  };
  return table;
}

at::Device LiveBackend::device(const LiveEnv& env) const {
  return on_gpu ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank)) : at::Device(at::kCPU);
}

const LiveBackend& live_backend(std::string_view name) {
  for (const auto& b : live_backends())
    if (b.name == name) return b;
  throw std::invalid_argument(
      fmt::format("unknown live backend '{}' (expected one of: {})", name, fmt::join(live_backend_names(), ", ")));
}

std::vector<std::string> live_backend_names() {
  std::vector<std::string> names;
  for (const auto& b : live_backends()) names.emplace_back(b.name);
  return names;
}

std::string live_backends_help() {
  std::vector<std::string> parts;
  for (const auto& b : live_backends()) parts.push_back(fmt::format("{} ({})", b.name, b.description));
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? " or " : ", ") + parts[i];
  return out;
}

}  // namespace dtsim::comm
