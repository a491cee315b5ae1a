#include "network_models/collective_reuse.hpp"

#include <fmt/format.h>

namespace dtsim::net {

ReuseConflict::ReuseConflict(const std::string& shape)
    : sim::RunRestart(fmt::format("a replayed collective ({}) met traffic its record did not have: run again without reusing it", shape)) {}

const ReuseRecord* CollectiveReuse::find(const ReuseKey& key) const {
  const auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

void CollectiveReuse::store(ReuseKey key, ReuseRecord record) { records_.try_emplace(std::move(key), std::move(record)); }

const PeriodRecord* CollectiveReuse::find_period(const ReuseKey& key) const {
  const auto it = period_records_.find(key);
  return it == period_records_.end() ? nullptr : &it->second;
}

void CollectiveReuse::store_period(ReuseKey key, PeriodRecord record) {
  period_records_.try_emplace(std::move(key), std::move(record));
}

void CollectiveReuse::restart() {
  open_period_.reset();
  period_replay_.reset();
  const auto restarts = stats_.restarts + 1;
  stats_ = ReuseStats{};
  stats_.restarts = restarts;
}

}  // namespace dtsim::net
