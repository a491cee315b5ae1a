#include "network_models/link_holds.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/collective_reuse.hpp"

namespace dtsim::net {

int LinkHolds::new_holder(const std::string& shape, CollectiveReuse* restarts) {
  auto it = std::find(shapes_.begin(), shapes_.end(), shape);
  if (it == shapes_.end()) it = shapes_.insert(shapes_.end(), shape);
  holders_.push_back({static_cast<int>(it - shapes_.begin()), restarts});
  return static_cast<int>(holders_.size() - 1);
}

void LinkHolds::take(int holder, std::span<const int> links, double first_use) {
  for (int l : links) {
    const Hold& h = holds_[static_cast<std::size_t>(l)];
    if (h.holder >= 0 && h.holder != holder && h.until >= first_use) conflict(h.holder, holder);
  }
  for (int l : links)
    change(l, [&](Hold& h) {
      h.holder = holder;
      h.until = std::numeric_limits<double>::infinity();
      if (h.claimed_by == holder) h.claimed_by = -1;
    });
}

void LinkHolds::free_after(int holder, std::span<const int> links, double t) {
  for (int l : links)
    change(l, [&](Hold& h) {
      if (h.holder == holder) h.until = t;
    });
  until_ = std::max(until_, t);
}

void LinkHolds::release(int holder, std::span<const int> links) {
  if (holds_.empty()) return;
  for (int l : links)
    change(l, [&](Hold& h) {
      if (h.holder == holder) {
        h.holder = -1;
        h.until = -std::numeric_limits<double>::infinity();
      }
      if (h.claimed_by == holder) h.claimed_by = -1;
    });
}

void LinkHolds::check_each(std::span<const int> links, double now) {
  if (holds_.empty()) return;
  for (int l : links) {
    const Hold& h = holds_[static_cast<std::size_t>(l)];
    if (h.claimed_by >= 0 || (h.holder >= 0 && now <= h.until)) conflict(h.holder, h.claimed_by);
  }
}

// Both rings are simulated, and not replayed, from the next attempt on: replayed, a ring
// would meet that traffic too.
void LinkHolds::conflict(int holder, int other) {
  std::string shape;
  for (int id : {holder, other}) {
    if (id < 0) continue;
    const Holder& h = holders_[static_cast<std::size_t>(id)];
    shape = shapes_[static_cast<std::size_t>(h.shape)];
    if (!h.restarts)
      throw std::logic_error(fmt::format("a ring computed without messages ({}) met other traffic, with no run to restart", shape));
    h.restarts->forbid_evaluation(shape);
    h.restarts->forbid(shape);
  }
  throw ReuseConflict(shape);
}

}  // namespace dtsim::net
