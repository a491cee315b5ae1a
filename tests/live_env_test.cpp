// comm::LiveEnv: a live rank's place in the job under torchrun, Open MPI, PMI (MPICH,
// Intel MPI) and Slurm, and the one-line errors for missing, malformed and conflicting
// variables. The variables come from a map, not the process environment. And the table of
// live backends a rank can run over.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "comm/gloo.hpp"
#include "comm/live_backend.hpp"
#include "comm/live_env.hpp"
#include "comm/nccl.hpp"
#include "config/scenario_error.hpp"

namespace dtsim::comm {
namespace {

using Vars = std::map<std::string, std::string>;

LiveEnv parse(const Vars& vars) {
  return LiveEnv::from_variables([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const Vars& vars) {
  try {
    parse(vars);
  } catch (const config::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LiveEnv, Torchrun) {
  auto env = parse({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.7"},
                    {"MASTER_PORT", "29600"}, {"DTSIM_TIMEOUT_S", "7"}});
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "10.0.0.7");
  EXPECT_EQ(env.master_port, 29600);
  EXPECT_EQ(env.timeout, std::chrono::seconds(7));
  EXPECT_FALSE(env.launcher_serves_store);
  // torchrun's agent serving the store: rank 0 does not serve another.
  env = parse({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_TRUE(env.launcher_serves_store);
}

TEST(LiveEnv, DefaultsOnOneMachine) {
  auto env = parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.master_addr, "127.0.0.1");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.timeout, std::chrono::seconds(60));
  EXPECT_EQ(env.job_id, "");
  env = parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"DTSIM_JOB_ID", "sweep-17"}});
  EXPECT_EQ(env.job_id, "sweep-17");
}

TEST(LiveEnv, OpenMpi) {
  auto env = parse({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(env.launcher, "Open MPI");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 3);
  EXPECT_EQ(env.master_addr, "127.0.0.1");  // one machine: 4 local of 4
}

TEST(LiveEnv, Pmi) {
  auto env = parse({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "2"}});
  EXPECT_EQ(env.launcher, "PMI");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 3);
  EXPECT_EQ(env.local_rank, 2);
}

TEST(LiveEnv, Slurm) {
  auto env = parse({{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"}, {"SLURM_NNODES", "2"},
                    {"MASTER_ADDR", "node01"}});
  EXPECT_EQ(env.launcher, "Slurm");
  EXPECT_EQ(env.rank, 6);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.master_addr, "node01");
}

// `srun torchrun ...`: Slurm's variables describe the torchrun agents (one per node),
// torchrun's the workers; the innermost launcher, torchrun, wins.
TEST(LiveEnv, NestedLaunchersTakeTheInnermost) {
  auto env = parse({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_NNODES", "2"},
                    {"RANK", "6"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "2"}, {"MASTER_ADDR", "node01"}});
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 6);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 2);
  // srun --mpi=pmix: Open MPI and Slurm describe the same job and agree.
  env = parse({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"},
               {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(env.launcher, "Open MPI");
  EXPECT_EQ(env.rank, 1);
}

TEST(LiveEnv, MissingVariables) {
  EXPECT_EQ(error_of({}), "live run: RANK is not set (nor OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "4"}}), "live run: RANK is not set, but WORLD_SIZE is");
  EXPECT_EQ(error_of({{"RANK", "1"}}), "live run: WORLD_SIZE is not set, but RANK is");
  // A rank from one launcher and a size from another are not mixed.
  EXPECT_EQ(error_of({{"RANK", "1"}, {"SLURM_NTASKS", "4"}}), "live run: WORLD_SIZE is not set, but RANK is");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_NNODES", "2"}}),
            "live run: MASTER_ADDR is not set, and this Slurm job spans several machines (SLURM_NNODES=2): set it "
            "to rank 0's host");
  EXPECT_EQ(error_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
            "live run: MASTER_ADDR is not set, and this Open MPI job spans several machines "
            "(OMPI_COMM_WORLD_LOCAL_SIZE=2): set it to rank 0's host");
}

TEST(LiveEnv, MalformedAndConflictingVariables) {
  EXPECT_EQ(error_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
            "environment variable RANK=\"4\": expected an integer in [0, 3]");
  EXPECT_EQ(error_of({{"RANK", "x"}, {"WORLD_SIZE", "4"}}),
            "environment variable RANK=\"x\": expected an integer in [0, 3]");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
            "environment variable WORLD_SIZE=\"0\": expected an integer in [1, 1048576]");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}),
            "environment variable MASTER_PORT=\"70000\": expected an integer in [1, 65535]");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"DTSIM_TIMEOUT_S", "0"}}),
            "environment variable DTSIM_TIMEOUT_S=\"0\": expected an integer in [1, 86400]");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "5"}}),
            "environment variable SLURM_LOCALID=\"5\": expected an integer in [0, 1]");
  // Two launchers describing a job of the same size must agree on the rank.
  EXPECT_EQ(error_of({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}}),
            "live run: conflicting ranks for a job of 4: RANK=1 but SLURM_PROCID=2; unset the variables of the "
            "launcher not in use");
}

// The live backends' table: each name once, what --help says, where each puts its tensors,
// whether this build runs it, and an unknown name refused with the known ones.
TEST(LiveBackends, TheTableIsWhatTheCommandsOffer) {
  EXPECT_EQ(live_backend_names(), (std::vector<std::string>{"gloo", "nccl"}));
  EXPECT_EQ(live_backends_help(), "gloo (CPU tensors) or nccl (CUDA tensors on GPU LOCAL_RANK; a CUDA build)");
  LiveEnv env = parse({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(live_backend("gloo").device(env), at::Device(at::kCPU));
  EXPECT_EQ(live_backend("nccl").device(env), at::Device(at::kCUDA, 1));
  EXPECT_EQ(live_backend("gloo").available(), gloo_available());
  EXPECT_EQ(live_backend("nccl").available(), nccl_available());
  // The NCCL library's release (no GPU needed), as "2.Y.Z"; "" in a build without NCCL.
  const std::string version = nccl_library_version();
  EXPECT_EQ(version.empty(), !DTSIM_TEST_HAVE_NCCL) << version;
  if (!version.empty()) {
    int major = 0, minor = -1, patch = -1;
    char end = 0;
    EXPECT_EQ(std::sscanf(version.c_str(), "%d.%d.%d%c", &major, &minor, &patch, &end), 3) << version;
    EXPECT_EQ(major, 2) << version;
    EXPECT_GE(minor, 0) << version;
    EXPECT_GE(patch, 0) << version;
  }
  try {
    live_backend("mpi");
    ADD_FAILURE() << "an unknown backend was found";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "unknown live backend 'mpi' (expected one of: gloo, nccl)");
  }
}

}  // namespace
}  // namespace dtsim::comm
