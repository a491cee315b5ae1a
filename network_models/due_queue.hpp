// net::DueQueue: the flow model's completion candidates, in (time, start order) order.
//
// FlowTransport pushes a candidate per flow whose rate a solve set, as a batch, and
// takes them from the front as simulated time reaches them; a candidate is stale once
// its flow's version moved on (the transport skips those).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtsim::net {

struct Due {  // a completion candidate; stale when the flow's version moved on
  double time;
  std::uint64_t sequence;  // start order, so simultaneous completions keep it
  int flow;
  std::uint64_t version;
  bool operator<(const Due& o) const { return time != o.time ? time < o.time : sequence < o.sequence; }
};
// The completion candidates in (time, start order) order. A solve's candidates arrive
// together and mostly in order already (a batch of flows that started together):
// each batch is sorted once into a run, and the runs are merged through a small heap of
// their fronts, so taking the next candidate is O(1) plus a sift among the few live
// runs rather than a sift through one heap of every flow. A batch that comes after the
// whole of a live run extends it instead of adding a front (equal flows finish in the
// order they start): up to kLanes runs stay open to extension, as piles in patience
// sorting, because ranks that drift apart start their flows one by one and the flows
// differ in a few ways (a chunk an element longer, a link shared where a row wraps):
// their candidates come as a few interleaved rising sequences, one lane each, where a
// single open run took only one of them and every other candidate became a front.
// The heap holds a copy of each run's front, so a sift compares entries in one array
// instead of following each run to its storage.
class DueQueue {
 public:
  void push(const Due& d) { open_.push_back(d); }  // into the open batch
  void seal();  // closes the open batch: its candidates become visible
  bool batch_open() const { return !open_.empty(); }  // candidates pushed since the last seal
  bool empty() const { return heap_.empty(); }
  // Entries of the merge heap (live runs and single candidates): stays 1 while each
  // batch comes after the last one, at most kLanes while the batches are kLanes rising
  // sequences interleaved.
  std::size_t fronts() const { return heap_.size(); }
  void clear();  // drops every candidate
  const Due& top() const { return heap_.front().front; }
  void pop();

 private:
  struct Run {
    std::vector<Due> entries;
    std::size_t pos = 0;
  };
  struct Front {
    Due front;  // runs_[run].entries[runs_[run].pos]
    int run;    // or kSingle: a batch of one candidate, held here alone
  };
  static constexpr int kSingle = -1;
  static constexpr std::size_t kCompactFrom = 256;
  // A live run that later batches may extend, with a copy of its last candidate (seal
  // compares a batch with every lane's last without following the runs).
  struct Lane {
    Due last;
    int run;
  };
  static constexpr std::size_t kLanes = 8;
  std::vector<Lane> lanes_;
  // The lane a sorted batch starting with `first` may extend: of those whose last
  // candidate comes before it, the one that ends latest (the tightest fit, leaving the
  // others for batches that come earlier); -1 when none.
  int fitting_lane(const Due& first) const;
  void extend(Lane& lane);  // appends the open batch to the lane's run
  void open_lane(int run);  // the new run `run` becomes a lane, replacing the latest-ending one when all are taken
  void close_lane(int run);  // the run is used up
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  std::vector<Due> open_;
  std::vector<Run> runs_;
  std::vector<int> free_runs_;
  // A 4-ary min-heap of the non-empty runs' fronts: when ranks drift apart (partitions
  // overlapping on a torus) a run lives per instant with flows in flight, about one per
  // flow, and a wider heap halves the levels a pop sifts through.
  static constexpr std::size_t kArity = 4;
  std::vector<Front> heap_;
};

// Inline: the transport takes a candidate per completion.
inline void DueQueue::pop() {
  Front& top = heap_.front();
  if (top.run == kSingle || ++runs_[top.run].pos == runs_[top.run].entries.size()) {
    if (top.run != kSingle) {
      free_runs_.push_back(top.run);
      close_lane(top.run);
    }
    top = heap_.back();
    heap_.pop_back();
  } else {
    const Run& run = runs_[top.run];
    top.front = run.entries[run.pos];
  }
  if (!heap_.empty()) sift_down(0);
}

inline void DueQueue::close_lane(int run) {
  for (std::size_t i = 0; i < lanes_.size(); ++i)
    if (lanes_[i].run == run) {
      lanes_[i] = lanes_.back();
      lanes_.pop_back();
      return;
    }
}

inline void DueQueue::sift_down(std::size_t i) {
  const Front moving = heap_[i];
  const std::size_t n = heap_.size();
  for (;;) {
    const std::size_t first = kArity * i + 1;
    if (first >= n) break;
    std::size_t m = first;
    for (std::size_t c = first + 1; c < std::min(first + kArity, n); ++c)
      if (heap_[c].front < heap_[m].front) m = c;
    if (!(heap_[m].front < moving.front)) break;
    heap_[i] = heap_[m];
    i = m;
  }
  heap_[i] = moving;
}

}  // namespace dtsim::net
