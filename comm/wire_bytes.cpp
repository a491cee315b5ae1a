#include "comm/wire_bytes.hpp"

#include <cmath>

namespace dtsim::comm {

std::uint64_t collective_bytes_sent(const net::CollectiveSpec& spec, int rank) {
  return static_cast<std::uint64_t>(std::llround(net::make_schedule(spec).bytes_sent(rank)));
}

}  // namespace dtsim::comm
