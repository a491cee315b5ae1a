// comm::EmulatedWorld: every rank of a job in one process, as coroutines on one
// sim::Engine. Reductions, gathers and exchanges move and combine the real tensors;
// the simulated network (net::Network) decides when each rank's operation completes.
//
// Collectives are matched by call order: the k-th collective a rank issues meets the
// k-th of every other rank (as in MPI and c10d), and a mismatch (another operation,
// size or dtype) is an error naming both ranks. A rank starts its part of a collective
// (its first sends) when it arrives; the result becomes visible to a rank only when its
// part completes in simulated time. Variable-size all-gathers start when the last rank
// arrives, since the schedule needs every block's size. Point-to-point messages of
// `exchange` are matched first-in first-out per (sender, receiver) pair. Stream
// collectives (Communicator::stream_all_reduce / stream_all_gather) take their place in
// the collective order when issued; the rank arrives when its previous stream collective
// completes (at once if none is in flight).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/compute_timing.hpp"
#include "network_models/schedule.hpp"
#include "sim/engine.hpp"

namespace dtsim::net {
class Network;
}

namespace dtsim::comm {

class EmulatedWorld {
 public:
  EmulatedWorld(sim::Engine& engine, std::shared_ptr<net::Network> network, ComputeTiming timing);
  ~EmulatedWorld();
  EmulatedWorld(const EmulatedWorld&) = delete;
  EmulatedWorld& operator=(const EmulatedWorld&) = delete;

  int size() const;
  Communicator& communicator(int rank);
  sim::Engine& engine() { return engine_; }
  net::Network& network() { return *network_; }
  const ComputeTiming& timing() const { return timing_; }

 private:
  friend class EmulatedCommunicator;
  // Channel keys: exchange messages use (src, dst); plain send/recv use
  // (src + kPointToPoint, dst), so the two kinds never match each other.
  static constexpr int kPointToPoint = 1 << 24;
  struct PendingCollective;
  struct Exchange;
  struct PendingReceive {
    std::shared_ptr<Exchange> exchange;
    std::size_t slot;
  };

  // Registers rank `r`'s part of its `seq`-th collective.
  // `on_stream`: a stream operation, whose completion starts the rank's next one.
  void arrive(int rank, std::uint64_t seq, net::CollectiveKind kind, const at::Tensor& tensor, int variant,
              std::vector<at::Tensor>* gather_outputs, std::shared_ptr<sim::Completion> done, bool on_stream = false);
  void start(PendingCollective& p, std::uint64_t seq);
  static void finish_exchange(const std::shared_ptr<Exchange>& ex);
  void rank_done(std::uint64_t seq, int rank);
  void deliver(int src, int dst, at::Tensor payload);
  void receive_matched(const PendingReceive& rv, at::Tensor payload, int src);

  sim::Engine& engine_;
  std::shared_ptr<net::Network> network_;
  ComputeTiming timing_;
  std::vector<std::unique_ptr<class EmulatedCommunicator>> ranks_;
  std::map<std::uint64_t, PendingCollective> collectives_;
  std::map<std::pair<int, int>, std::deque<at::Tensor>> arrived_;              // (src, dst) FIFO
  std::map<std::pair<int, int>, std::deque<PendingReceive>> receivers_;        // (src, dst) FIFO
};

}  // namespace dtsim::comm
