#include "network_models/collective_reuse.hpp"

#include <fmt/format.h>

namespace dtsim::net {

ReuseConflict::ReuseConflict(const std::string& shape)
    : sim::RunRestart(fmt::format("a replayed or computed collective ({}) met traffic it did not allow for: run again simulating it", shape)) {}

namespace {

// The entry for `key` as it is (a record keyed by its first arrival's last bit), else
// the one recorded without a tie (any last bit).
template <typename Map>
const typename Map::mapped_type* find_either(const Map& records, const ReuseKey& key) {
  if (const auto it = records.find(key); it != records.end()) return &it->second;
  ReuseKey any_bit = key;
  any_bit.last_bit = kAnyLastBit;
  const auto it = records.find(any_bit);
  return it == records.end() ? nullptr : &it->second;
}

}  // namespace

const ReuseRecord* CollectiveReuse::find(const ReuseKey& key) const { return find_either(records_, key); }

void CollectiveReuse::store(ReuseKey key, ReuseRecord record) { records_.try_emplace(std::move(key), std::move(record)); }

const PeriodRecord* CollectiveReuse::find_period(const ReuseKey& key) const { return find_either(period_records_, key); }

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
