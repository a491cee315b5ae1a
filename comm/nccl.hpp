// comm::NcclCommunicator: a live rank over NCCL's C API, for tensors on CUDA devices.
//
// - Rendezvous through the same c10d TCPStore as Gloo (comm/live_job.hpp; rank 0
//   publishes the ncclUniqueId), so a missing or dead rank is named the same way.
//   LOCAL_RANK picks the GPU. One rank on one GPU works (ncclCommInitRank, nranks 1).
// - Communication runs on a stream of its own (cudaStreamNonBlocking), ordered after
//   the rank's compute stream (LibTorch's current stream) by an event, so it overlaps
//   later compute. Awaiting an Op waits on the host until the op's completion event
//   (polling cudaEventQuery, failing when the watchdog aborts), as Gloo's wait blocks,
//   and makes the compute stream wait for it too: the wait is timed as the await's, not
//   as the next compute phase's, the op stays under the watchdog's timeout until it is
//   done, and copies back to the host never block on a hung operation.
// - all_reduce (sum; average with ncclAvg), broadcast, all_gather with variable sizes
//   (the sizes first, then grouped ncclSend/ncclRecv), exchange as grouped send/receive;
//   send/recv run on a second communicator and stream so that they are matched in order
//   separately from exchange, as the interface requires. Each send and recv is its own
//   NCCL call, issued when made: a pattern where every rank sends before it receives (a
//   ring shift) can block in NCCL's connection set-up, and a send to oneself needs its
//   recv in the same group; calibration's ping-pong (send, then recv, against recv, then
//   send) is the pattern used. Gossip uses exchange(), one group. CPU tensors (the CPU workloads
//   of `dtsim live --backend nccl`) are staged through the rank's GPU: copied there
//   before the operation and back when it is awaited.
// - compute() runs the work, times it with CUDA events on the compute stream, and
//   waits for it, so the rank's clock and phase times include the GPU time.
// - A watchdog thread aborts the communicator when NCCL reports an asynchronous error
//   or an operation is outstanding longer than DTSIM_TIMEOUT_S; the await, or the next
//   operation, then fails naming the rank that is gone (LiveJob::explain_failure). The
//   destructor drains the streams within the timeout, or aborts.
// - Averages use ncclAvg, which scales before summing: the last bits can differ from
//   Gloo's and the emulated all-reduce's sum-then-divide.
//
// Compiled whenever NCCL and the CUDA runtime are found (DTSIM_HAVE_NCCL); it can move
// tensors only with a CUDA LibTorch (DTSIM_TORCH_CUDA), so a CPU LibTorch build refuses
// to start it. Not run on the CPU development machine: it compiles there against the
// CUDA toolkit's headers, and runs on a GPU machine with PyTorch 2.x's LibTorch.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/live_env.hpp"
#include "network_models/network_config.hpp"

namespace dtsim::comm {

// Creates the rank's communicator on GPU LOCAL_RANK; throws std::runtime_error with one
// line ("this dtsim was built without NCCL/CUDA LibTorch" when it cannot run at all).
std::unique_ptr<Communicator> make_nccl_communicator(const LiveEnv& env, net::NetworkConfig accounting = {});

// Whether this build can run the NCCL backend (NCCL found and a CUDA LibTorch).
bool nccl_available();

// The release of the NCCL library this build runs, "2.20.5" (ncclGetVersion, which needs no
// GPU); "" in a build without NCCL.
std::string nccl_library_version();

}  // namespace dtsim::comm
