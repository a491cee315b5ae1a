// comm::LiveJob: the part of a live job every backend shares — the c10d TCPStore
// rendezvous at MASTER_ADDR:MASTER_PORT (rank 0 serves it, as under torchrun), and
// liveness: which rank is gone when an operation fails.
//
// Rendezvous. Rank 0 publishes the job (its DTSIM_JOB_ID, then its WORLD_SIZE); every
// other rank reads them and takes its seat (an atomic counter under its rank); rank 0
// waits up to the timeout for every seat and publishes the outcome, so a peer that never
// arrives is named by rank ("rank 3 never joined (waited 5 s)") on every rank that did,
// not by address. A rank that finds no store names rank 0. A process that cannot take
// part says why in the store, and rank 0 ends the rendezvous at once with that line for
// every rank that joined (the first reason published stays); it then keeps the store up
// for the window at least, and until as many processes as the job has ranks have heard,
// so that a rank still starting reads that line too rather than find no rank 0.
//
// Liveness. Each rank's heartbeat thread writes "<beat> <operations completed>" under
// its key every beat (timeout / 20, between 0.1 s and 1 s), on a store connection of its
// own. When an operation fails (a peer's socket closed, a timeout), explain_failure()
// watches every other rank's heartbeat for a window of 5 beats: ranks whose heartbeat
// did not move and that did not report ending on their own are gone. The first rank to
// find out publishes the verdict ("rank 2 is gone (no heartbeat for 5 s)"); every other
// rank takes it from the store (its heartbeat thread caches it), so all survivors name
// the same rank, and later failures that merely cascade from the first (a survivor
// exiting closes its sockets too) do not blame the survivor. If the store itself closes,
// rank 0 (which serves it) is the one gone; if it stops answering with its connections
// open, the failure names the store ("the store at ADDR:PORT stopped answering ...").
//
// Rank 0 keeps the store up after a failure until every other rank has either seen the
// verdict, ended, or stopped beating (bounded by the window), so the survivors'
// diagnoses do not fail on a vanished store.
//
// Bad peers at MASTER_PORT. Each process of the job ends with one line (exit status 1)
// within the timeout plus the window, or is not disturbed at all:
//
// - Garbage (a client that is not a store client, or a broken one). c10d 1.13's store
//   server is one daemon thread in rank 0 that polls its connections and reads each
//   request with blocking recv()s; whatever a request handler throws is caught and
//   drops that connection alone. So random bytes, an unknown query type, or a length
//   prefix too large to allocate cost the stray its connection and nothing else. But a
//   request cut short and held open (a valid query type, then fewer bytes than its
//   length prefix says, or none) blocks the daemon in recv() for as long as the stray
//   keeps the connection: every rank's store call then waits, and rank 0 cannot even
//   exit (destroying the store joins the daemon). Defence: rank 0 sets a receive and a
//   send timeout (Timing::stray, timeout / 2 between 0.5 s and 5 s) on the store's
//   listening socket and on every connection (comm/store_guard.hpp); a client stalled in the
//   middle of a request (or not reading its replies) that long is dropped by the daemon
//   itself and the job goes on undisturbed. (A length prefix that can be allocated is
//   allocated, and zeroed, before the read: a stray claiming gigabytes costs rank 0
//   that memory until it is dropped.) Independently, every store call of dtsim returns
//   or throws within the timeout (the first call on each connection sets its receive
//   timeout), so a store that stops answering anyway — the launcher's, or rank 0's
//   stopped — ends the rendezvous with "the store at ADDR:PORT stopped answering during
//   the rendezvous (no reply within T s)" and, later, names itself in the failure of
//   the next operation instead of a rank; such a store is left to the process's exit.
// - A second job on the same port. Its rank 0 cannot bind: "cannot serve the store at
//   ADDR:PORT: the port is in use (two processes have RANK=0, or another job or program
//   is using MASTER_PORT PORT)". Its other ranks reach the first job's store. After the
//   first job's rendezvous they are refused without writing anything ("the job at
//   ADDR:PORT had already started without this process (another job is using
//   MASTER_PORT PORT, or two processes have RANK=1)") and the first job runs on
//   undisturbed. During it, no rank can tell which process of a rank is whose: a taken
//   seat, or a second rank 0 that could not bind, ends the rendezvous for everyone with
//   "rank 1 joined twice (two processes have RANK=1, or two jobs use MASTER_PORT PORT)";
//   but the second job's ranks that find free seats first take them, and if they fill
//   the job before any conflict shows, the job runs with them and the latecomers are
//   refused. DTSIM_JOB_ID, set per job, closes that gap: a process whose job differs
//   from rank 0's is refused before taking a seat ("another job is using MASTER_PORT
//   PORT: rank 0 at ADDR:PORT runs job "a", this process job "b"") and the first job is
//   not disturbed at any time.
// - A WORLD_SIZE that differs from rank 0's (larger or smaller, at any rank, rank 0's
//   included): that rank does not take a seat and every process ends at once with
//   "WORLD_SIZE is 4 at rank 2 but 3 at rank 0". (`dtsim live` first checks WORLD_SIZE
//   against the scenario's ranks: a process whose WORLD_SIZE differs from its own
//   scenario's stops there with status 2, and the others name it as never joined.)
// - Two processes with the same RANK (and so a rank missing): the second to take the
//   seat ends the rendezvous for everyone with "rank 1 joined twice (...)" instead of
//   the missing rank's timeout; a second RANK=0 cannot bind and says so, as above.
//
// - A flood of connections that exhausts rank 0's descriptors. c10d's daemon lets the
//   failed accept() escape its thread (std::terminate, a core dump); rank 0 installs a
//   terminate handler that turns exactly that exception into "rank 0: the store at
//   ADDR:PORT stopped serving: ... (errno: 24 - Too many open files)" and status 1 (any
//   other terminate aborts as before); the other ranks then name rank 0 as gone.
//
// A client that speaks the store's protocol can still do anything (set a job's keys,
// or register a watch and vanish, which c10d later fails a real rank's request for):
// the defence is against strays and mistakes, not against a hostile peer.
//
// Store keys (all under "dtsim/"): job, world_size, joined/<r>, conflict,
// claimed_world_size, rendezvous, acks, heard, hb/<r> ("<beat> <operations completed>", which tests read to see a job under
// way), state/<r>, seen/<r>, verdict, verdict_claim, gone; the NCCL backend adds nccl_id
// and nccl_p2p_id. Gloo's own keys have no prefix.
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
    std::chrono::milliseconds stray;   // rank 0's store drops a client stalled mid-request this long
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
