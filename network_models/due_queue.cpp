#include "network_models/due_queue.hpp"

#include <algorithm>

namespace dtsim::net {

void DueQueue::clear() {
  open_.clear();
  lanes_.clear();
  heap_.clear();
  free_runs_.clear();
  for (std::size_t i = 0; i < runs_.size(); ++i) free_runs_.push_back(static_cast<int>(i));
}

int DueQueue::fitting_lane(const Due& first) const {
  int best = -1;
  for (std::size_t i = 0; i < lanes_.size(); ++i)
    if (!(first < lanes_[i].last) && (best < 0 || lanes_[static_cast<std::size_t>(best)].last < lanes_[i].last))
      best = static_cast<int>(i);
  return best;
}

void DueQueue::extend(Lane& lane) {
  Run& run = runs_[lane.run];
  if (run.pos >= kCompactFrom && 2 * run.pos >= run.entries.size()) {  // drop the consumed front
    run.entries.erase(run.entries.begin(), run.entries.begin() + static_cast<std::ptrdiff_t>(run.pos));
    run.pos = 0;
  }
  if (open_.size() == 1) run.entries.push_back(open_.front());  // no call to memmove for one
  else run.entries.insert(run.entries.end(), open_.begin(), open_.end());
  lane.last = open_.back();
  open_.clear();
}

void DueQueue::open_lane(int run) {
  const Lane lane{runs_[run].entries.back(), run};
  if (lanes_.size() < kLanes) {
    lanes_.push_back(lane);
    return;
  }
  auto latest = std::max_element(lanes_.begin(), lanes_.end(), [](const Lane& a, const Lane& b) { return a.last < b.last; });
  if (lane.last < latest->last) *latest = lane;
}

void DueQueue::seal() {
  if (open_.empty()) return;
  if (!std::is_sorted(open_.begin(), open_.end())) std::sort(open_.begin(), open_.end());
  if (const int lane = fitting_lane(open_.front()); lane >= 0) {
    extend(lanes_[static_cast<std::size_t>(lane)]);
    return;
  }
  if (open_.size() == 1 && lanes_.size() == kLanes) {  // no lane to open: no run to keep
    heap_.push_back({open_.front(), kSingle});
    open_.clear();
    sift_up(heap_.size() - 1);
    return;
  }
  int id;
  if (free_runs_.empty()) {
    id = static_cast<int>(runs_.size());
    runs_.emplace_back();
  } else {
    id = free_runs_.back();
    free_runs_.pop_back();
  }
  Run& run = runs_[id];
  run.entries.swap(open_);  // the open batch becomes the run; the run's old buffer is reused
  open_.clear();
  run.pos = 0;
  open_lane(id);
  heap_.push_back({run.entries.front(), id});
  sift_up(heap_.size() - 1);
}

void DueQueue::sift_up(std::size_t i) {
  while (i > 0) {
    const std::size_t parent = (i - 1) / kArity;
    if (!(heap_[i].front < heap_[parent].front)) break;
    std::swap(heap_[parent], heap_[i]);
    i = parent;
  }
}


}  // namespace dtsim::net
