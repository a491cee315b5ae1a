// comm::LiveJob: the part of a live job every backend shares — the c10d TCPStore
// rendezvous at MASTER_ADDR:MASTER_PORT (rank 0 serves it, as under torchrun), and
// liveness: which rank is gone when an operation fails.
//
// Rendezvous. Every rank registers under its own key; rank 0 waits up to the timeout for
// all of them and publishes the outcome, so a peer that never arrives is named by rank
// ("rank 3 never joined (waited 5 s)") on every rank that did, not by address. A rank
// that finds no store names rank 0; a rank number used twice and a WORLD_SIZE that
// differs between ranks are named too.
//
// Liveness. Each rank's heartbeat thread writes "<beat> <operations completed>" under
// its key every beat (timeout / 20, between 0.1 s and 1 s), on a store connection of its
// own. When an operation fails (a peer's socket closed, a timeout), explain_failure()
// watches every other rank's heartbeat for a window of 5 beats: ranks whose heartbeat
// did not move and that did not report ending on their own are gone. The first rank to
// find out publishes the verdict ("rank 2 is gone (no heartbeat for 5 s)"); every other
// rank takes it from the store (its heartbeat thread caches it), so all survivors name
// the same rank, and later failures that merely cascade from the first (a survivor
// exiting closes its sockets too) do not blame the survivor. If the store itself stops
// answering, rank 0 (which serves it) is the one gone.
//
// Rank 0 keeps the store up after a failure until every other rank has either seen the
// verdict, ended, or stopped beating (bounded by the window), so the survivors'
// diagnoses do not fail on a vanished store.
//
// Store keys (all under "dtsim/"): world_size, joined/<r>, rendezvous, acks, hb/<r>
// ("<beat> <operations completed>", which tests read to see a job under way),
// state/<r>, seen/<r>, verdict, verdict_claim, gone; the NCCL backend adds nccl_id and
// nccl_p2p_id. Gloo's own keys have no prefix.
//
// Compiled when the LibTorch found has c10d (DTSIM_HAVE_C10D); otherwise join() throws.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/live_env.hpp"

#if DTSIM_HAVE_C10D
#include <torch/csrc/distributed/c10d/Store.hpp>
#endif

namespace dtsim::comm {

class LiveJob {
 public:
  struct Timing {
    std::chrono::milliseconds beat;    // heartbeat period
    std::chrono::milliseconds window;  // silence that makes a rank gone
  };
  static Timing timing_for(std::chrono::milliseconds timeout);

  // Connects to (rank 0: serves) the store and waits until every rank has joined.
  // Throws std::runtime_error with one line naming the missing or conflicting rank.
  static std::shared_ptr<LiveJob> join(const LiveEnv& env);

  virtual ~LiveJob() = default;
  virtual const LiveEnv& env() const = 0;
#if DTSIM_HAVE_C10D
  // The rendezvous store, for the backend's own setup (Gloo's full mesh, NCCL's id).
  virtual c10::intrusive_ptr<c10d::Store> store() = 0;
#endif

  // One more operation of this rank completed (published with the heartbeat).
  virtual void op_completed() = 0;
  // After an operation of this rank failed: the rank(s) gone, as "rank 2 is gone (no
  // heartbeat for 5 s)", or "" when every rank is still beating (the failure is not a
  // dead peer). May wait up to the window. Marks this rank as failed.
  virtual std::string explain_failure() = 0;
  // This rank is ending after a failure: says so in the store and (rank 0) keeps the
  // store up until the other ranks have heard. Also done by the destructor.
  virtual void end_failed() = 0;
  // Whether an operation of this rank failed (explain_failure was called).
  virtual bool failed() const = 0;
};

}  // namespace dtsim::comm
