// comm::NcclCommunicator: a live rank over NCCL's C API, for tensors on CUDA devices.
//
// - Rendezvous through the same c10d TCPStore as Gloo (comm/live_job.hpp; rank 0
//   publishes the ncclUniqueId), so a missing or dead rank is named the same way.
//   LOCAL_RANK picks the GPU. One rank on one GPU works (ncclCommInitRank, nranks 1).
// - Communication runs on a stream of its own (cudaStreamNonBlocking), ordered after
//   the rank's compute stream (LibTorch's current stream) by an event, so it overlaps
//   later compute. Awaiting an Op makes the compute stream wait for the op's completion
//   event (as c10d's Work::wait does for NCCL): the host does not block; the result is
//   ready for whatever the compute stream runs next. Op readiness is cudaEventQuery.
// - all_reduce (sum; average with ncclAvg), broadcast, all_gather with variable sizes
//   (the sizes first, then grouped ncclSend/ncclRecv), exchange as grouped send/receive;
//   send/recv run on a second communicator and stream so that they are matched in order
//   separately from exchange, as the interface requires. CPU tensors (the CPU workloads
//   of `dtsim live --backend nccl`) are staged through the rank's GPU: copied there
//   before the operation and back when it is awaited.
// - compute() runs the work, times it with CUDA events on the compute stream, and
//   waits for it, so the rank's clock and phase times include the GPU time.
// - A watchdog thread aborts the communicator when NCCL reports an asynchronous error
//   or an operation is outstanding longer than DTSIM_TIMEOUT_S; the next operation then
//   fails naming the rank that is gone (LiveJob::explain_failure).
//
// Compiled whenever NCCL and the CUDA runtime are found (DTSIM_HAVE_NCCL); it can move
// tensors only with a CUDA LibTorch (DTSIM_TORCH_CUDA), so a CPU LibTorch build refuses
// to start it. Not run on the CPU development machine: it compiles there against the
// CUDA toolkit's headers, and runs on a GPU machine with PyTorch 2.x's LibTorch.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/live_env.hpp"
#include "network_models/network.hpp"

namespace dtsim::comm {

// Creates the rank's communicator on GPU LOCAL_RANK; throws std::runtime_error with one
// line ("this dtsim was built without NCCL/CUDA LibTorch" when it cannot run at all).
std::unique_ptr<Communicator> make_nccl_communicator(const LiveEnv& env, net::NetworkConfig accounting = {});

// Whether this build can run the NCCL backend (NCCL found and a CUDA LibTorch).
bool nccl_available();

}  // namespace dtsim::comm
