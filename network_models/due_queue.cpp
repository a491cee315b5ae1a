#include "network_models/due_queue.hpp"

#include <algorithm>

namespace dtsim::net {

void DueQueue::clear() {
  open_.clear();
  tail_ = kNoRun;
  heap_.clear();
  free_runs_.clear();
  for (std::size_t i = 0; i < runs_.size(); ++i) free_runs_.push_back(static_cast<int>(i));
}

void DueQueue::seal() {
  if (open_.empty()) return;
  if (!std::is_sorted(open_.begin(), open_.end())) std::sort(open_.begin(), open_.end());
  if (tail_ != kNoRun) {
    // Flows of one size and rate finish in the order they start: a batch that comes
    // after the whole of the last run continues it, and the merge heap does not grow.
    Run& tail = runs_[tail_];
    if (!(open_.front() < tail.entries.back())) {
      if (tail.pos >= kCompactFrom && 2 * tail.pos >= tail.entries.size()) {  // drop the consumed front
        tail.entries.erase(tail.entries.begin(), tail.entries.begin() + static_cast<std::ptrdiff_t>(tail.pos));
        tail.pos = 0;
      }
      if (open_.size() == 1) tail.entries.push_back(open_.front());  // no call to memmove for one
      else tail.entries.insert(tail.entries.end(), open_.begin(), open_.end());
      open_.clear();
      return;
    }
  }
  if (open_.size() == 1) {  // most batches once ranks drift apart: no run to keep
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
  tail_ = id;
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
