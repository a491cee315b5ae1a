// sim::EventQueue's hot code: push, pop and what they call, inline where the engine fires
// events (sim/engine.cpp), and for the queue's own tests and benchmark; event_queue.hpp
// holds the layout. Neither reaches the engine's users (engine.hpp holds the queue by
// pointer), so tuning the queue recompiles the engine alone.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "sim/event_queue.hpp"

namespace dtsim::sim {

// Starts loading the cache line at address `a`. The empty volatile asm that takes the
// address is an effect the compiler must keep: GCC 12 deleted, as having no effect, a loop
// whose body only prefetched (the lookahead over a bucket's events, see prefetch_bucket),
// and also the call of a function that only read memory and prefetched. Either cost the
// engine benchmark about 10 % at 65,536 pending, while the source still showed the
// prefetches (only the disassembly did not).
inline void prefetch_line(std::uintptr_t a) noexcept {
  __builtin_prefetch(reinterpret_cast<const void*>(a));
  asm volatile("" : : "r"(a));
}
inline void prefetch_line(const void* p) noexcept { prefetch_line(reinterpret_cast<std::uintptr_t>(p)); }

// Starts loading the first two cache lines of what an event resumes or fires: a
// coroutine frame's resume pointer, its suspend point and its first locals. The frame
// arena (frame_arena.hpp) aligns frames to lines, so these are its first 128 bytes. (At
// malloc's 16-byte alignment, three in four of the engine benchmark's 120-byte frames
// straddled three lines, and loading the third as well made it 8 % faster; on the
// arena's frames the third load measured no faster.) Integer arithmetic, since the
// target may be null (a call event).
inline void prefetch_target(const void* target) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(target);
  prefetch_line(a);
  prefetch_line(a + 64);
}

inline void EventQueue::append_compacting(std::vector<QueuedEvent>& events, std::size_t& pos, const QueuedEvent& e) {
  if (pos >= 4096 && 2 * pos >= events.size()) {
    events.erase(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(pos));
    pos = 0;
  }
  events.push_back(e);
}

inline void EventQueue::push(const QueuedEvent& e) {
  if (e.time_bits == now_bits_) {
    // At the time of the last popped event (a zero delay): after every event pending
    // at that time (pushed earlier) and before every later one, so in arrival order.
    append_compacting(now_, now_pos_, e);
    ++size_;
    return;
  }
  const double x = position(e);
  if (x < active_limit_) {
    // While the heap is empty, an event after the whole run joins its end (a burst at
    // one future time arrives in order): no sift. Once one goes to the heap, the rest
    // follow until it drains, so that with random times the choice stays predictable.
    if (heap_.empty()) {
      if (run_empty()) {
        run_.clear();
        run_pos_ = 0;
        run_.push_back(e);
        ++size_;
        return;
      }
      if (key(run_.back()) < key(e)) {
        append_compacting(run_, run_pos_, e);
        ++size_;
        return;
      }
    }
    heap_push(e);
    // Spreading costs O(size): only when the heap holds a good share of it. A small
    // epoch's heap holds everything, so it is spread as soon as the queue is no longer
    // small: a threshold of kLargeHeap there kept a queue that hovers about that size
    // (the flow model's 1,024 ranks, one message each in flight) in one heap for good.
    const std::size_t large = nbuckets_ == 0 ? kSmallEpochHeap : kLargeHeap;
    if (const auto h = heap_.size(); h > large && h > size_ / 4) spread();
  }
  else if (x < static_cast<double>(nbuckets_)) place(static_cast<std::size_t>(x), e);
  else far_.push_back(e);
  ++size_;
}

inline QueuedEvent EventQueue::pop() {
  if (from_now()) {
    const QueuedEvent next = now_[now_pos_];
    --size_;
    if (++now_pos_ == now_.size()) {
      now_.clear();
      now_pos_ = 0;
      if (size_ > 0 && run_empty() && heap_.empty()) advance();  // as below
    }
    return next;
  }
  while (run_empty() && heap_.empty()) advance();  // e.g. the first pop: all is in far_
  QueuedEvent next;
  if (from_run()) {
    next = run_[run_pos_++];
    // The event after the next one is known too: start loading what it will resume,
    // which is the slowest part of firing it when many programs are pending.
    if (run_pos_ + 1 < run_.size()) prefetch_target(run_[run_pos_ + 1].target);
    // Further ahead: the inline events of the next few buckets.
    if (ahead_ < ahead_end_ && ahead_ <= cur_ + kLookahead) prefetch_bucket(ahead_++);
  } else {
    next = heap_.front();
    heap_pop();
  }
  now_bits_ = next.time_bits;
  // Activate the next bucket now rather than at the next pop, so that peek_hint()
  // knows the next event, and start loading what its first two events resume (the
  // prefetch above covers the rest of the run). (Later pushes into earlier buckets go
  // to the heap anyway.)
  --size_;
  if (run_empty() && heap_.empty() && size_ > now_.size() - now_pos_) {
    advance();
    for (std::size_t i = run_pos_; i < run_pos_ + 2 && i < run_.size(); ++i) prefetch_target(run_[i].target);
  }
  return next;
}

template <typename F>
void EventQueue::for_each(F&& f) const {
  for (std::size_t i = now_pos_; i < now_.size(); ++i) f(now_[i]);
  for (std::size_t i = run_pos_; i < run_.size(); ++i) f(run_[i]);
  for (std::size_t i = 0; i < heap_.size(); ++i) f(heap_[i]);
  for (std::size_t j = cur_ + 1; j < open_limit_; ++j) {
    const std::size_t r = j & ring_mask_;
    for (std::size_t k = 0; k < slot_count(r); ++k) f(slots_[r * kSlots + k]);
    for (auto n = heads_[r]; n != kNil; n = nodes_[n].next) f(nodes_[n].event);
  }
  for (std::size_t b = open_limit_ / kBlockBuckets; b < blocks_.size(); ++b)
    for_each_in_block(blocks_[b], f);
  for (const auto& e : far_) f(e);
}

inline void EventQueue::bucket_push(std::size_t bucket, const QueuedEvent& e) {
  if (slot_capacity_ != 0) {
    if (const unsigned c = counts_[bucket]; c < slot_capacity_) {
      slots_[bucket * kSlots + c] = e;
      counts_[bucket] = static_cast<std::uint8_t>(c + 1);
      return;
    }
  }
  std::uint32_t n = free_node_;
  if (n != kNil) {
    free_node_ = nodes_[n].next;
    nodes_[n] = Node{e, heads_[bucket]};
    // The free list is cold (nodes freed epochs ago, anywhere in the pool): start
    // loading the node the next push takes.
    if (free_node_ != kNil) __builtin_prefetch(&nodes_[free_node_], 1);
  } else {
    if (nodes_.size() >= kNil) throw std::length_error("EventQueue: too many pending events");
    n = static_cast<std::uint32_t>(nodes_.size());
    nodes_.push_back(Node{e, heads_[bucket]});
  }
  heads_[bucket] = n;
}

inline void EventQueue::place(std::size_t j, const QueuedEvent& e) {
  if (j < open_limit_) bucket_push(j & ring_mask_, e);
  else block_append(j / kBlockBuckets, e);
}

inline void EventQueue::block_append(std::size_t b, const QueuedEvent& e) {
  Block& block = blocks_[b];
  if (block.tail_count == kChunkEvents) {
    const std::uint32_t c = take_chunk();
    (block.tail == kNil ? block.head : chunk_next_[block.tail]) = c;
    block.tail = c;
    block.tail_count = 0;
  }
  chunk_events_[std::size_t{block.tail} * kChunkEvents + block.tail_count++] = e;
}

template <typename F>
void EventQueue::for_each_in_block(const Block& block, F&& f) const {
  for (std::uint32_t c = block.head; c != kNil; c = chunk_next_[c]) {
    const std::size_t n = c == block.tail ? block.tail_count : kChunkEvents;
    const QueuedEvent* events = &chunk_events_[std::size_t{c} * kChunkEvents];
    for (std::size_t i = 0; i < n; ++i) f(events[i]);
  }
}

inline void EventQueue::prefetch_bucket(std::size_t b) noexcept {
  const std::size_t r = b & ring_mask_;
  const QueuedEvent* s = &slots_[r * kSlots];
  for (std::size_t i = 0, c = counts_[r]; i < c; ++i) prefetch_target(s[i].target);
}

}  // namespace dtsim::sim
