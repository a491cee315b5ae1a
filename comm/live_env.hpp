// Where a live rank finds its place in the job, under any of four launchers:
//
//   launcher   rank                  world size            local rank (picks the GPU)
//   torchrun   RANK                  WORLD_SIZE            LOCAL_RANK
//   Open MPI   OMPI_COMM_WORLD_RANK  OMPI_COMM_WORLD_SIZE  OMPI_COMM_WORLD_LOCAL_RANK
//   PMI        PMI_RANK              PMI_SIZE              MPI_LOCALRANKID (MPICH, Intel MPI)
//   Slurm      SLURM_PROCID          SLURM_NTASKS          SLURM_LOCALID
//
// The first launcher in this order whose rank variable is set is the one used: launches
// nest (`srun torchrun ...`, `mpirun` inside an sbatch script), and the innermost
// launcher, listed first, knows this process. Its world size variable must be set too.
// Two launchers that describe a job of the same size must agree on the rank. The local
// rank defaults to 0.
//
// The rendezvous is at MASTER_ADDR:MASTER_PORT (rank 0 serves it). MASTER_ADDR may be
// left out only when the launcher says the job is on one machine (torchrun or no way to
// tell: 127.0.0.1); Open MPI and Slurm jobs over several machines must set it.
// DTSIM_TIMEOUT_S (default 60) bounds every wait for a peer. DTSIM_JOB_ID, when set, names
// the job: a process whose DTSIM_JOB_ID differs from rank 0's is refused ("another job is
// using MASTER_PORT ..."), so a second job started on the same port cannot take seats in
// the first one's rendezvous (comm/live_job.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace dtsim::comm {

struct LiveEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 29500;
  std::chrono::milliseconds timeout{60000};  // a peer that never answers ends the job
  std::string launcher = "torchrun";         // whose variables were read
  // torchrun's agent already serves a TCPStore at MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE
  // is "True"): rank 0 connects to it instead of serving one.
  bool launcher_serves_store = false;
  std::string job_id;  // DTSIM_JOB_ID; "" when unset

  // Reads the environment; throws std::invalid_argument with a one-line message naming
  // the variable that is missing, malformed or in conflict.
  static LiveEnv from_environment();
  // The same, from `get` (a variable's value, or nullptr when unset).
  static LiveEnv from_variables(const std::function<const char*(const char*)>& get);
};

// A TCP port on the loopback interface that was free a moment ago, drawn at random below
// the kernel's ephemeral range: the rendezvous of a job started on this machine alone
// (tests, one-rank benchmarks). Another job may take it in between only by choosing it
// too, which concurrent runs make rare, not impossible.
std::uint16_t free_loopback_port();

}  // namespace dtsim::comm
