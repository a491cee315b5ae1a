// The live backends (one process per rank): the one place their names are listed.
// `dtsim live --backend`, `dtsim calibrate` and `dtsim compare` read the table; adding a
// backend is its communicator file and one entry (comm/README.md).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/live_env.hpp"
#include "network_models/network_config.hpp"

namespace dtsim::comm {

struct LiveBackend {
  std::string_view name;         // as --backend spells it
  std::string_view description;  // what tensors it moves, for --help
  // The rank's communicator; blocks until every rank has joined (or throws naming the
  // rendezvous). Traffic is counted under the collective algorithms `accounting` selects.
  std::unique_ptr<Communicator> (*make)(const LiveEnv& env, net::NetworkConfig accounting);
  // Whether this build can run it.
  bool (*available)();
  // Its tensors live on CUDA device LOCAL_RANK (otherwise on the CPU).
  bool on_gpu;

  at::Device device(const LiveEnv& env) const;
};

std::span<const LiveBackend> live_backends();
// The backend called `name`; std::invalid_argument naming the known ones otherwise.
const LiveBackend& live_backend(std::string_view name);
std::vector<std::string> live_backend_names();
// "gloo (CPU tensors) or nccl (CUDA tensors on GPU LOCAL_RANK; a CUDA build)", for --help.
std::string live_backends_help();

}  // namespace dtsim::comm
