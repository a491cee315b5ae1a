// Where a live rank finds its place in the job: torchrun's environment variables
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or Open MPI's and Slurm's
// equivalents for the rank, world size and local rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dtsim::comm {

struct LiveEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 29500;
  std::chrono::milliseconds timeout{60000};  // a peer that never answers ends the job

  // Reads the environment; throws std::invalid_argument with a one-line message naming
  // the variable that is missing or malformed.
  static LiveEnv from_environment();
};

}  // namespace dtsim::comm
