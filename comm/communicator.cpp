#include "comm/communicator.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::comm {

void Communicator::unsupported(const char* op) const {
  throw std::runtime_error(fmt::format("backend {} does not support {}", backend(), op));
}

Op Communicator::all_reduce(at::Tensor&, ReduceOp) { unsupported("all_reduce"); }
Op Communicator::all_gather(const at::Tensor&, std::vector<at::Tensor>&) { unsupported("all_gather"); }
Op Communicator::exchange(const at::Tensor&, std::span<const int>, std::vector<at::Tensor>&) {
  unsupported("exchange");
}
Op Communicator::broadcast(at::Tensor&, int) { unsupported("broadcast"); }
Op Communicator::send(const at::Tensor&, int) { unsupported("send"); }
Op Communicator::recv(at::Tensor&, int) { unsupported("recv"); }

}  // namespace dtsim::comm
