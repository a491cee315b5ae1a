#include "network_models/collective_reuse.hpp"

#include <fmt/format.h>

namespace dtsim::net {

ReuseConflict::ReuseConflict(const std::string& shape)
    : sim::RunRestart(fmt::format("cross traffic during a replayed collective ({}): run again without reusing it", shape)) {}

const ReuseRecord* CollectiveReuse::find(const ReuseKey& key) const {
  const auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

void CollectiveReuse::store(ReuseKey key, ReuseRecord record) { records_.try_emplace(std::move(key), std::move(record)); }

void CollectiveReuse::restart() {
  const auto restarts = stats_.restarts + 1;
  stats_ = ReuseStats{};
  stats_.restarts = restarts;
}

}  // namespace dtsim::net
