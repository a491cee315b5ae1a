#include "sim/event_queue.hpp"
#include "sim/event_queue_inline.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dtsim::sim {

void EventQueue::heap_push(const QueuedEvent& e) {
  heap_.push_back(e);
  QueuedEvent* h = heap_.data();
  std::size_t i = heap_.size() - 1;
  while (i > 0) {
    const std::size_t parent = (i - 1) / 4;
    if (!(key(e) < key(h[parent]))) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

void EventQueue::push_reserved(const QueuedEvent& e) {
  if (e.time_bits != now_bits_) throw std::logic_error("EventQueue::push_reserved: not at the time of the last pop");
  // Those pushed since the reservation are at the end of now_: few, so a scan from there.
  auto at = now_.end();
  while (at != now_.begin() + static_cast<std::ptrdiff_t>(now_pos_) && (at - 1)->seq > e.seq) --at;
  now_.insert(at, e);
  ++size_;
}

void EventQueue::heap_pop() noexcept {
  const QueuedEvent last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0, last);
}

void EventQueue::sift_down(std::size_t i, QueuedEvent e) noexcept {
  QueuedEvent* h = heap_.data();
  const std::size_t n = heap_.size();
  const Key e_key = key(e);
  // Move the hole at i down towards the smallest child until `e` fits.
  for (;;) {
    const std::size_t c = 4 * i + 1;
    std::size_t m;
    if (c + 3 < n) {
      // Which sibling is smallest is a coin flip for the branch predictor: select by
      // arithmetic on the comparison results instead of branching.
      const std::size_t a = c + (key(h[c + 1]) < key(h[c]));
      const std::size_t b = c + 2 + (key(h[c + 3]) < key(h[c + 2]));
      const std::size_t b_wins = key(h[b]) < key(h[a]);
      m = a + ((b - a) & (0 - b_wins));
    } else {
      if (c >= n) break;
      m = c;
      for (std::size_t k = c + 1; k < n; ++k)
        if (key(h[k]) < key(h[m])) m = k;
    }
    if (!(key(h[m]) < e_key)) break;
    h[i] = h[m];
    i = m;
  }
  h[i] = e;
}

void EventQueue::advance() {
  while (++cur_ < nbuckets_) {
    if (cur_ + kOpenAhead >= open_limit_ && open_limit_ < nbuckets_) open_block();
    const std::size_t r = cur_ & ring_mask_;
    const std::size_t count = slot_count(r);
    std::uint32_t n = heads_[r];
    if (count == 0 && n == kNil) continue;
    active_limit_ = static_cast<double>(cur_ + 1);
    heads_[r] = kNil;
    if (ahead_ <= cur_) ahead_ = cur_ + 1;  // the lookahead never lags the current bucket
    // The next bucket's first listed event is read when this run is done: start loading
    // it (pushed a while ago, it has left the first-level cache).
    if (cur_ + 1 < open_limit_) {
      if (const auto next = heads_[(cur_ + 1) & ring_mask_]; next != kNil) __builtin_prefetch(&nodes_[next]);
    }
    gather_run(count == 0 ? nullptr : &slots_[r * kSlots], count, n);
    return;
  }
  new_epoch();
}

std::uint32_t EventQueue::take_chunk() {
  if (const std::uint32_t c = free_chunk_; c != kNil) {
    free_chunk_ = chunk_next_[c];
    chunk_next_[c] = kNil;
    return c;
  }
  if (chunk_next_.size() >= kNil) throw std::length_error("EventQueue: too many pending events");
  const auto c = static_cast<std::uint32_t>(chunk_next_.size());
  chunk_next_.push_back(kNil);
  chunk_events_.resize(chunk_events_.size() + kChunkEvents);
  return c;
}

void EventQueue::free_chunks(Block& block) noexcept {
  if (block.head != kNil) {
    chunk_next_[block.tail] = free_chunk_;
    free_chunk_ = block.head;
  }
  block = Block{};
}

void EventQueue::open_block() {
  // The ring's buckets for the block are those two blocks back, all consumed (the
  // current bucket is past them): emptied, they take the block's events.
  const std::size_t first = open_limit_;
  const std::size_t last = std::min(first + kBlockBuckets, nbuckets_);
  for (std::size_t j = first; j < last; ++j) {
    counts_[j & ring_mask_] = 0;
    heads_[j & ring_mask_] = kNil;
  }
  open_limit_ = last;
  Block& block = blocks_[first / kBlockBuckets];
  for (std::uint32_t c = block.head; c != kNil; c = chunk_next_[c]) {
    // Written a while ago, the chunks have left the cache: load the next one a chunk
    // ahead, a line for every two events laid out (all at once, its 16 lines held up
    // the loads in flight).
    const std::uint32_t next = chunk_next_[c];
    const QueuedEvent* ahead = &chunk_events_[std::size_t{next == kNil ? c : next} * kChunkEvents];
    const std::size_t n = c == block.tail ? block.tail_count : kChunkEvents;
    const QueuedEvent* events = &chunk_events_[std::size_t{c} * kChunkEvents];
    for (std::size_t i = 0; i < n; ++i) {
      if (i % 2 == 0) prefetch_line(ahead + i);
      bucket_push(static_cast<std::size_t>(position(events[i])) & ring_mask_, events[i]);
    }
  }
  free_chunks(block);
}

void EventQueue::gather_run(const QueuedEvent* slots, std::size_t count, std::uint32_t node) {
  // A bucket's handful of events (inline, then listed) each go straight to their place
  // in the run as they are gathered: one pass, where copying them all and then sorting
  // took two. Past kInsertionSortUpTo (a burst into one bucket) the rest are appended and
  // the whole run sorted (start_run), since inserting each would be quadratic.
  run_pos_ = 0;
  // The inline events go straight to their ranks among themselves, counted without a
  // branch: an insertion sort of a handful of events in random order mispredicted its
  // way through about one branch per event.
  // (Appended in rank order, not stored at their ranks: resizing the run first would
  // value-initialize it, and copying that first zeroed entry to the others was itself a
  // 16-byte load of two narrower stores, which the store buffer cannot forward.)
  std::uint8_t in_order[kSlots];
  for (std::size_t i = 0; i < count; ++i) {
    const Key k = key(slots[i]);
    std::size_t rank = 0;
    for (std::size_t j = 0; j < count; ++j) rank += key(slots[j]) < k;
    in_order[rank] = static_cast<std::uint8_t>(i);
  }
  run_.clear();
  for (std::size_t r = 0; r < count; ++r) run_.push_back(slots[in_order[r]]);
  const auto take = [this](const QueuedEvent& e) {
    const std::size_t size = run_.size();
    run_.push_back(e);
    if (size >= kInsertionSortUpTo) return;
    QueuedEvent* r = run_.data();
    const Key k = key(e);
    std::size_t j = size;
    for (; j > 0 && k < key(r[j - 1]); --j) r[j] = r[j - 1];
    r[j] = e;
  };
  while (node != kNil) {
    take(nodes_[node].event);
    const std::uint32_t next = nodes_[node].next;
    nodes_[node].next = free_node_;
    free_node_ = node;
    node = next;
  }
  if (run_.size() > kInsertionSortUpTo) start_run();
}

namespace {

// How much narrower than the mean's the earliest quarter's range must be for new_epoch
// to take it: well clear of a single mode's spread of ratios (a uniform spread gives 1,
// the engine benchmark's hold model 1.25).
constexpr double kBimodalRatio = 4.0;

// The pending times new_epoch samples (at even strides of far_, whose order is the
// order of the pushes) to estimate where a quarter of them fall.
constexpr std::size_t kSample = 256;

// The time below which a quarter of the `n` sampled `times` fall (reorders them).
double earliest_quarter_end(double* times, std::size_t n) {
  std::nth_element(times, times + n / 4, times + n);
  return times[n / 4];
}

}  // namespace

void EventQueue::new_epoch() {
  // Here the run, the heap and the buckets are empty: far_ holds every pending event.
  double t_min = std::numeric_limits<double>::infinity();
  double t_max = 0.0;
  double sum = 0.0;
  double sample[kSample];
  std::size_t sampled = 0;
  const std::size_t stride = std::max<std::size_t>(1, far_.size() / kSample);
  std::size_t until_sample = 0;
  for (const auto& e : far_) {
    const double t = std::bit_cast<double>(e.time_bits);
    t_min = std::min(t_min, t);
    t_max = std::max(t_max, t);
    sum += t;
    if (until_sample-- == 0) {
      until_sample = stride - 1;
      if (sampled < kSample) sample[sampled++] = t;
    }
  }
  ahead_ = ahead_end_ = 0;
  slot_capacity_ = 0;
  blocks_.clear();  // all opened (or drained by spread): their chunks are free
  open_limit_ = 0;
  ring_mask_ = ~std::size_t{0};
  if (far_.size() <= kSmall) {
    // Small: one bucket without end. Everything is sorted into the run, and every later
    // push goes to the heap: its position is 0 (not, say, an overflow to infinity from
    // an earlier epoch's scale).
    run_.swap(far_);
    far_.clear();
    start_ = 0.0;
    inv_width_ = 0.0;
    nbuckets_ = 0;
    cur_ = 0;
    active_limit_ = std::numeric_limits<double>::infinity();
    start_run();
    return;
  }
  // Twice the mean distance to the earliest event estimates the range of the pending
  // events (all of a uniform spread, and robust to a few far-future outliers). The epoch
  // spans `ranges` such ranges, with about kPerBucket events per bucket as laid out (more
  // once pushes fill the later buckets). Each event pushed beyond the epoch is laid out
  // again at the next one, so a longer epoch saves that pass for most of them. Small
  // epochs span kLongEpochRanges: their pushes go to node lists that stay in cache.
  // Large ones span kLargeEpochRanges: their buckets are laid out a block at a time
  // (open_block), so memory is in proportion to the events, not to the span.
  //
  // Where the pending times are bimodal (a network's microsecond messages beside
  // millisecond compute phases), the mean is set by the far mode and the near events,
  // which are the next to fire, would share a few wide buckets: they would go to the heap.
  // Then the earliest quarter's span estimates the density where the epoch starts, and
  // sets the range when it is much the smaller (a single mode gives about the same
  // range either way: a uniform spread exactly); the far mode waits in far_, laid out
  // again each epoch, which an epoch pays for with the events it fires meanwhile.
  const bool large = far_.size() > kLongEpochsUpTo;
  const std::size_t ranges = large ? kLargeEpochRanges : kLongEpochRanges;
  const double mean_range = 2.0 * (sum / static_cast<double>(far_.size()) - t_min);
  const double near_range = 4.0 * (earliest_quarter_end(sample, sampled) - t_min);
  const bool bimodal = near_range > 0.0 && near_range < mean_range / kBimodalRatio;
  const double span = static_cast<double>(ranges) * (bimodal ? near_range : mean_range);
  nbuckets_ = std::clamp<std::size_t>(far_.size() * ranges / (large ? kPerLargeBucket : kPerBucket), 1, kMaxBuckets);
  inv_width_ = static_cast<double>(nbuckets_) / span;
  start_ = t_min;
  cur_ = 0;
  active_limit_ = 1.0;
  if (!(span > 0.0) || !std::isfinite(inv_width_)) {
    // All at one time (a burst, like every rank starting at 0), or rounding made the
    // span vanish. Buckets of no width: the earliest time is the first bucket, and any
    // later time lands beyond the last. If all are at the earliest time, they are the
    // run as they are.
    inv_width_ = std::numeric_limits<double>::max();
    if (t_max == t_min) {
      run_.swap(far_);
      far_.clear();
      nbuckets_ = 1;
      start_run();
      return;
    }
  }
  if (large) {
    slot_capacity_ = kSlots;
    ring_mask_ = kRingBuckets - 1;
    open_limit_ = std::min(nbuckets_, kRingBuckets);
    heads_.assign(kRingBuckets, kNil);
    counts_.assign(kRingBuckets, 0);
    slots_.resize(kRingBuckets * kSlots);
    blocks_.resize((nbuckets_ + kBlockBuckets - 1) / kBlockBuckets);
  } else {
    open_limit_ = nbuckets_;
    heads_.assign(nbuckets_, kNil);
  }

  // One pass: the earliest event always lands in the run (position 0), the rest in their
  // buckets or back in far_.
  run_.clear();
  std::size_t kept = 0;
  for (std::size_t k = 0; k < far_.size(); ++k) {
    const QueuedEvent e = far_[k];
    const double x = position(e);
    if (x < active_limit_) run_.push_back(e);
    else if (x < static_cast<double>(nbuckets_)) place(static_cast<std::size_t>(x), e);
    else far_[kept++] = e;
  }
  far_.resize(kept);
  // With few events pending, their targets stay in cache: prefetching ahead would only
  // cost instructions.
  ahead_ = 1;
  ahead_end_ = large && size_ >= kLookaheadFrom ? nbuckets_ : 0;
  start_run();
}

void EventQueue::spread() {
  // The heap grew large (in a small epoch, or from many pushes into the current
  // bucket): hand everything active to far_ and lay out a new epoch. Buckets after the
  // current one and far_ hold later events; they go along, so the new epoch sees all.
  for (std::size_t i = run_pos_; i < run_.size(); ++i) far_.push_back(run_[i]);
  run_.clear();
  run_pos_ = 0;
  for (std::size_t i = 0; i < heap_.size(); ++i) far_.push_back(heap_[i]);
  heap_.clear();
  for (std::size_t j = cur_ + 1; j < open_limit_; ++j) {
    const std::size_t r = j & ring_mask_;
    for (std::size_t k = 0; k < slot_count(r); ++k) far_.push_back(slots_[r * kSlots + k]);
    for (auto n = heads_[r]; n != kNil;) {
      far_.push_back(nodes_[n].event);
      const std::uint32_t next = nodes_[n].next;
      nodes_[n].next = free_node_;
      free_node_ = n;
      n = next;
    }
    heads_[r] = kNil;
  }
  for (auto& block : blocks_) {
    for_each_in_block(block, [&](const QueuedEvent& e) { far_.push_back(e); });
    free_chunks(block);
  }
  nbuckets_ = 0;
  open_limit_ = 0;
  cur_ = 0;
  new_epoch();
}

void EventQueue::start_run() {
  run_pos_ = 0;
  // A run built whole (a new epoch's first bucket, a burst gathered into one): a handful
  // of events get an insertion sort, with no call into std::sort. On a sorted run (a
  // burst at one time, appended in sequence order) it is one comparison per event, like
  // is_sorted.
  QueuedEvent* r = run_.data();
  const std::size_t n = run_.size();
  if (n <= kInsertionSortUpTo) {
    for (std::size_t i = 1; i < n; ++i) {
      const QueuedEvent e = r[i];
      const Key k = key(e);
      std::size_t j = i;
      for (; j > 0 && k < key(r[j - 1]); --j) r[j] = r[j - 1];
      r[j] = e;
    }
    return;
  }
  const auto before = [](const QueuedEvent& a, const QueuedEvent& b) { return key(a) < key(b); };
  if (!std::is_sorted(run_.begin(), run_.end(), before)) std::sort(run_.begin(), run_.end(), before);
}

void EventQueue::clear() noexcept {
  now_.clear();
  now_pos_ = 0;
  now_bits_ = 0;
  run_.clear();
  run_pos_ = 0;
  heap_.clear();
  slots_.clear();
  counts_.clear();
  slot_capacity_ = 0;
  nodes_.clear();
  free_node_ = kNil;
  heads_.clear();
  far_.clear();
  blocks_.clear();
  chunk_events_.clear();
  chunk_next_.clear();
  free_chunk_ = kNil;
  open_limit_ = 0;
  ring_mask_ = ~std::size_t{0};
  size_ = 0;
  ahead_ = ahead_end_ = 0;
  start_ = 0.0;
  inv_width_ = 0.0;
  active_limit_ = -std::numeric_limits<double>::infinity();
  cur_ = 0;
  nbuckets_ = 0;
}

}  // namespace dtsim::sim
