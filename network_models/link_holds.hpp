// net::LinkHolds: the links held for rings computed without their messages.
//
// On the flow model a ring's alone senders send nothing (ring_wavefront.hpp): their
// messages are computed as running alone on their links, which is right only if nothing
// else runs there meanwhile. So those links are held for the ring:
// - claimed at its first arrival (claim: none may carry a flow or be claimed by another
//   ring; then every transfer on them conflicts);
// - held from each sender's arrival, until a time not known yet (take: an earlier ring's
//   hold must end before the sender's first transfer starts);
// - until its last message arrives (free_after);
// - or given up when the ring is replayed instead (release).
// A conflict forbids evaluating (and replaying) the rings involved, in the CollectiveReuse
// their holders named, and throws ReuseConflict: the run starts again and simulates them.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace dtsim::net {

class CollectiveReuse;

class LinkHolds {
 public:
  // A holder for one ring of shape `shape`; without `restarts` a conflict is a logic
  // error (a ring alone on its engine meets nothing).
  int new_holder(const std::string& shape, CollectiveReuse* restarts);
  // Claims `links` of a network of `link_count` directed links for `holder`, unless one
  // carries a flow (`carries_flow(link)`) or is claimed already: then nothing is claimed.
  template <typename CarriesFlow>
  bool claim(int holder, std::span<const int> links, std::size_t link_count, CarriesFlow&& carries_flow) {
    if (holds_.empty()) holds_.resize(link_count);
    for (int l : links)
      if (holds_[static_cast<std::size_t>(l)].claimed_by >= 0 || carries_flow(l)) return false;
    for (int l : links) change(l, [&](Hold& h) { h.claimed_by = holder; });
    return true;
  }
  void take(int holder, std::span<const int> links, double first_use);
  void free_after(int holder, std::span<const int> links, double t);
  void release(int holder, std::span<const int> links);
  // Whether a link is held or claimed at `now` (an evaluated ring is running).
  bool live(double now) const { return open_ > 0 || now < until_; }
  // A transfer starts on `links` at `now`: a conflict if one is held or claimed.
  void check(std::span<const int> links, double now) {
    if (open_ > 0 || now <= until_) check_each(links, now);
  }

 private:
  struct Hold {
    double until = -std::numeric_limits<double>::infinity();  // +infinity: not known yet
    int holder = -1;      // the ring holding it, -1 none
    int claimed_by = -1;  // a ring that holds it once its sender arrives, -1 none
    bool open() const { return claimed_by >= 0 || (holder >= 0 && until == std::numeric_limits<double>::infinity()); }
  };
  struct Holder {
    int shape;  // index into shapes_
    CollectiveReuse* restarts;
  };
  // Applies `f` to the link's hold, keeping the count of open ones.
  template <typename F>
  void change(int link, F&& f) {
    Hold& h = holds_[static_cast<std::size_t>(link)];
    open_ -= h.open();
    f(h);
    open_ += h.open();
  }
  void check_each(std::span<const int> links, double now);
  [[noreturn]] void conflict(int holder, int other);

  std::vector<Hold> holds_;  // per directed link, sized at the first claim
  std::vector<Holder> holders_;
  std::vector<std::string> shapes_;
  int open_ = 0;  // links claimed, or held until a time not known yet
  double until_ = -std::numeric_limits<double>::infinity();  // the latest known end of a hold
};

}  // namespace dtsim::net
