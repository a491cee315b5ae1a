// net::Execution: one collective (or neighbour exchange) in flight on the network, as
// its starter sees it: ranks enter at their own times and each is told when it is done.
// The kinds (collective_execution.hpp, closed_form.hpp) are the network's business.
#pragma once

#include <functional>

namespace dtsim::net {

class Execution {
 public:
  using RankDone = std::function<void(int rank)>;
  virtual ~Execution() = default;
  // Rank `rank` enters the collective at the current simulated time.
  virtual void arrive(int rank) = 0;
};

}  // namespace dtsim::net
