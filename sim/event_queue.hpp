// sim::EventQueue: the engine's pending events, popped in exact (time, sequence) order.
//
// Comparing (time bits, sequence) as one 128-bit number is the exact order; sequences
// are unique, so it is total.
//
// Structure: a calendar of time buckets in front of a sorted run and a small heap.
//  - now_: events pushed at exactly the time of the last pop (zero delays: a program
//    spawned, a message to itself, a solve batched at this instant). Their sequences
//    exceed those of every other event pending at that time, and their time precedes
//    every other, so arriving in order they are sorted: a FIFO, no sift, no sort.
//  - run_: the events of the current bucket, sorted when the bucket became current, and
//    consumed from the front; while the heap is empty, an event pushed into the current
//    bucket after the whole run is appended to it (it only has to be sorted in itself).
//  - heap_: a 4-ary min-heap of events pushed into the current bucket (or before it)
//    after it became current: zero-delay events and the like. (While the queue is
//    small, the heap is all there is: see kSmall.)
//  - bucket j for cur_ < j < nbuckets_: unsorted events whose time falls in bucket j
//    of the current epoch (start_ + j * width, width = 1 / inv_width_). In a large
//    epoch only the buckets of the next block or two are laid out (in slots); a later
//    block's events wait in a list of chunks until it opens (see place()).
//  - far_: unsorted events beyond the epoch's last bucket.
// The bucket of a time is floor((t - start_) * inv_width_), a non-decreasing function
// of t, so every active event (run or heap) precedes every bucketed one, which precede
// every far one: only the active ones need ordering, and they are about one bucket's
// worth. When run and heap run dry the next non-empty bucket is sorted into the run;
// after the last bucket a new epoch spreads far_ over fresh buckets sized to it. Each
// event is thus appended a couple of times and sorted among a handful, instead of
// sifting through log4(n) levels of one large heap. Bucket choice affects only speed:
// equal times always share a bucket, and ties are ordered by sequence.
//
// This header holds the layout and the small accessors; push, pop and what they call are
// in event_queue_inline.hpp. Only the engine's source, the queue's tests and its
// benchmark include them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace dtsim::sim {

enum class EventKind : std::uint64_t { resume, call, completion, handler };

// One pending event, self-contained so that firing it needs no other lookup.
struct QueuedEvent {
  std::uint64_t time_bits;  // bits of a finite, non-negative double: order like it
  std::uint64_t seq;        // insertion sequence: unique, increasing
  void* target;             // the coroutine frame to resume, the Completion to fire, or the Handler
  std::uint64_t aux;        // kind | callback index (or the handler's argument) << 2
  EventKind kind() const noexcept { return static_cast<EventKind>(aux & 3); }
};

class EventQueue {
 public:
  __extension__ using Key = unsigned __int128;
  static Key key(const QueuedEvent& e) noexcept { return (static_cast<Key>(e.time_bits) << 64) | e.seq; }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }

  // `e` must not precede the last popped event.
  void push(const QueuedEvent& e);

  // `e` is at the time of the last pop, with a sequence taken before those of some events
  // pushed at that time since (Engine::reserve_sequence): it goes among them in order.
  void push_reserved(const QueuedEvent& e);

  // Whether an event is pending at the time of the last pop (true before the first pop,
  // when the queue cannot tell cheaply; nothing fires then to ask).
  //
  // Exact otherwise, and it must be: a model that asks (the flow model batching its
  // solve) schedules an event or not by the answer, so an answer that depended on how
  // the buckets are laid out would make the event sequence, and the trace hash, depend
  // on the queue's tuning.
  bool pending_at_last_pop() const noexcept {
    if (now_pos_ < now_.size()) return true;
    if (size_ == 0) return false;
    if (const QueuedEvent* next = peek_hint()) return next->time_bits == now_bits_;
    // Only later buckets or far_ hold events (pushed since the pop emptied the run and
    // the heap): one at the last pop's time would have joined now_, or shared the
    // popped event's bucket. Before the first epoch, everything waits in far_.
    return active_limit_ == -std::numeric_limits<double>::infinity();
  }

  // Removes and returns the earliest event. Requires !empty().
  QueuedEvent pop();

  // The event pop() returns next unless an earlier one is pushed first, or nullptr when
  // empty (or not yet known: the next bucket is activated by pop). A hint for
  // prefetching.
  const QueuedEvent* peek_hint() const noexcept {
    if (from_now()) return &now_[now_pos_];
    if (run_empty() && heap_.empty()) return nullptr;
    return from_run() ? &run_[run_pos_] : &heap_.front();
  }

  template <typename F>
  void for_each(F&& f) const;

  // Drops every pending event; the queue starts afresh (capacity is kept).
  void clear() noexcept;

  // The current epoch's bucket width in seconds (infinite for a small epoch's single
  // bucket, 0 for a burst at one time): for tests of how epochs are laid out.
  double bucket_width() const noexcept { return 1.0 / inv_width_; }

 private:
  static constexpr std::size_t kMaxBuckets = std::size_t{1} << 20;
  // Events a bucket is sized for, as an epoch is laid out: about kPerBucket in a small
  // epoch; kPerLargeBucket in a large one, whose open buckets have kSlots inline slots
  // (about 5 events reach a bucket in the engine benchmark's hold model once pushes
  // during the epoch are counted, and few of them overflow 8 slots).
  static constexpr std::size_t kPerBucket = 2;
  static constexpr std::size_t kPerLargeBucket = 4;
  static constexpr std::size_t kSlots = 8;
  // Below kSmall events a plain heap beats any calendar: an epoch that starts that small
  // takes everything into the heap, until the heap outgrows kSmallEpochHeap and is
  // spread over a calendar again. Within a calendar epoch, the heap of events pushed into
  // the current bucket is spread when it outgrows kLargeHeap and a quarter of all events.
  static constexpr std::size_t kSmall = 64;
  static constexpr std::size_t kLargeHeap = 1024;
  // As soon as the queue is no longer small (see push()): at 4 x kSmall the flow model's
  // 1,024-rank torus ring, about 90 events pending, stayed in one heap for good, its
  // sift 13 % of the run; spread at kSmall it runs 7 % faster (2 x kSmall: 4 %), and the
  // engine benchmark is unchanged.
  static constexpr std::size_t kSmallEpochHeap = kSmall;
  // Epochs over that many pending events or fewer (small ones) span kLongEpochRanges
  // times their range (see new_epoch); larger ones span kLargeEpochRanges, in blocks
  // (see place()). Measured in bench/engine_bench.cpp: with runs gathered in place
  // (gather_run), 32 ranges beat 8 by 4 to 5 % at 1,024 pending; at 65,536, 4 ranges
  // beat 1 by about 5 % once blocks made memory independent of the span, and 2, 8 and 16
  // measured within noise of 4 (bench/results/engine-and-flow.md).
  static constexpr std::size_t kLongEpochsUpTo = 4096;
  static constexpr std::size_t kLongEpochRanges = 32;
  static constexpr std::size_t kLargeEpochRanges = 4;
  static constexpr std::size_t kInsertionSortUpTo = 16;

  // Where `e` falls in the current epoch, in buckets (fractional). Monotone in time.
  double position(const QueuedEvent& e) const noexcept {
    return (std::bit_cast<double>(e.time_bits) - start_) * inv_width_;
  }
  // An open bucket of a large epoch (see place()) holds up to kSlots events inline, in its
  // own stretch of slots_ (counts_[r] of them, r its place in the ring), and the rest in
  // a list of nodes; a small epoch's buckets have no slots (slot_capacity_ 0), only lists.
  //  - Slots make the open buckets one array in time order: going from bucket to bucket
  //    streams through memory (and their targets can be prefetched a few buckets ahead),
  //    and a push is one store. Nodes of a list are scattered through the pool once it
  //    outgrows the cache, and walking one misses at every node: at 65,536 pending events
  //    slots made the engine benchmark about 10 % faster than a counting sort of the
  //    epoch's events with lists for the later pushes (bench/results/engine-and-flow.md).
  //  - A small epoch spans kLongEpochRanges ranges at about kPerBucket events a bucket, so
  //    slots for every bucket would take many times the memory of its events, while its
  //    few nodes, recycled through a LIFO free list, stay in cache.
  // Nodes live in one pool with a free list, so pushing touches the bucket's head and a
  // recycled node, and allocates nothing once the pool has grown to its peak.
  struct Node {
    QueuedEvent event;
    std::uint32_t next;
  };
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;
  std::size_t slot_count(std::size_t bucket) const noexcept { return slot_capacity_ == 0 ? 0 : counts_[bucket]; }
  void bucket_push(std::size_t bucket, const QueuedEvent& e);
  // A large epoch's buckets come in blocks of kBlockBuckets, and only two blocks' worth
  // of them (kRingBuckets, a ring indexed by bucket & ring_mask_) have slots and lists at
  // a time: those of the current bucket's block and the next, "open" (every bucket below
  // open_limit_). An event for a later block is appended to that block's list of chunks,
  // and laid out into the ring's slots when the block opens, kOpenAhead buckets before
  // the current one reaches it (open_block).
  //  - Why: with slots for every bucket of the epoch, a push stored into a random one of
  //    them, megabytes apart; once these outgrew the second-level cache, each push was a
  //    store miss, and the store buffer filled. A block's chunk list is written at its
  //    end, and a chunk taken from the free list is the one last emptied (LIFO): recently
  //    read, still cached. The ring's slots (64 KiB) stay in cache too. What is left to
  //    miss is reading a block's chunks when it opens, in order, which prefetches well.
  //  - Memory is in proportion to the events, not to the epoch's span (a partial chunk
  //    a block), so large epochs can span several ranges: fewer events go to far_ to be
  //    laid out again.
  // A small epoch has no blocks: its ring is all its buckets (ring_mask_ all ones,
  // open_limit_ = nbuckets_).
  static constexpr std::size_t kBlockBuckets = 128;
  static constexpr std::size_t kRingBuckets = 2 * kBlockBuckets;
  static constexpr std::size_t kOpenAhead = kBlockBuckets / 2;
  static constexpr std::size_t kChunkEvents = 32;
  struct Block {
    std::uint32_t head = kNil;  // first chunk
    std::uint32_t tail = kNil;  // last chunk, in which tail_count events are used
    std::uint32_t tail_count = kChunkEvents;  // full: the first append takes a chunk
  };
  // Bucket j (cur_ < j < nbuckets_) of the epoch gets `e`.
  void place(std::size_t j, const QueuedEvent& e);
  void block_append(std::size_t b, const QueuedEvent& e);
  // Calls f(event) for each event of the block, in chunk order.
  template <typename F>
  void for_each_in_block(const Block& block, F&& f) const;
  std::uint32_t take_chunk();
  void free_chunks(Block& block) noexcept;
  void open_block();
  bool run_empty() const noexcept { return run_pos_ == run_.size(); }
  // Appends e to a consumed-from-the-front sequence (now_ or run_, `pos` its first
  // unconsumed event), first dropping the consumed front once it is most of the vector.
  static void append_compacting(std::vector<QueuedEvent>& events, std::size_t& pos, const QueuedEvent& e);
  // Whether the next event is the first of now_: it has the time of the last pop, so
  // only events pending at that time from before (with smaller sequences) precede it,
  // and those are in the run or the heap.
  bool from_now() const noexcept {
    if (now_pos_ == now_.size()) return false;
    const Key k = key(now_[now_pos_]);
    return (run_empty() || k < key(run_[run_pos_])) && (heap_.empty() || k < key(heap_.front()));
  }
  // Whether the next event is the run's first (else the heap's root). Requires one of
  // them to be non-empty.
  bool from_run() const noexcept {
    return !run_empty() && (heap_.empty() || key(run_[run_pos_]) < key(heap_.front()));
  }
  void start_run();
  void gather_run(const QueuedEvent* slots, std::size_t count, std::uint32_t node);
  // Starts loading the targets of open bucket b's inline events. (Loading the slots of a
  // bucket further on as well, as when every bucket had slots, measured no faster: the
  // ring's slots stay in the second-level cache.)
  void prefetch_bucket(std::size_t b) noexcept;
  void heap_push(const QueuedEvent& e);
  void heap_pop() noexcept;
  void sift_down(std::size_t i, QueuedEvent e) noexcept;
  void advance();
  void new_epoch();
  void spread();

  // Events pushed at the time of the last pop, in arrival (= key) order; now_[now_pos_]
  // is the first not yet popped.
  std::vector<QueuedEvent> now_;
  std::size_t now_pos_ = 0;
  std::uint64_t now_bits_ = 0;  // time of the last pop (0.0 before the first)
  std::vector<QueuedEvent> run_;  // the active bucket, sorted; run_[run_pos_] is next
  std::size_t run_pos_ = 0;
  std::vector<QueuedEvent> heap_;  // 4-ary: the children of i are 4i+1..4i+4
  std::vector<QueuedEvent> slots_;    // ring bucket r's inline events: kSlots from slots_[r * kSlots]
  std::vector<std::uint8_t> counts_;  // how many of them are in use
  std::uint32_t slot_capacity_ = 0;   // kSlots in a large epoch, 0 in a small one
  std::vector<Node> nodes_;
  std::uint32_t free_node_ = kNil;
  std::vector<std::uint32_t> heads_;  // first node of each ring bucket (small epoch: each bucket)
  std::vector<QueuedEvent> far_;
  // A large epoch's blocks (see place()): their chunk lists, and the chunk pool.
  std::vector<Block> blocks_;
  std::vector<QueuedEvent> chunk_events_;   // chunk c: kChunkEvents from c * kChunkEvents
  std::vector<std::uint32_t> chunk_next_;   // the next chunk of its list, or of the free list
  std::uint32_t free_chunk_ = kNil;
  std::size_t open_limit_ = 0;              // buckets below it are in the ring
  std::size_t ring_mask_ = ~std::size_t{0};
  // No epoch yet: everything goes to far_, and the first pop starts one.
  double start_ = 0.0;
  double inv_width_ = 0.0;
  double active_limit_ = -std::numeric_limits<double>::infinity();  // cur_ + 1 within an epoch
  std::size_t cur_ = 0;
  std::size_t nbuckets_ = 0;
  // Prefetching: the targets of bucket ahead_'s inline events are the next to be loaded;
  // it stays at most kLookahead buckets past the current one (about 16 events). ahead_end_
  // is nbuckets_ in a large epoch of at least kLookaheadFrom events, else 0: fewer
  // targets stay in cache, and prefetching them would only cost instructions.
  static constexpr std::size_t kLookahead = 4;
  static constexpr std::size_t kLookaheadFrom = 16384;  // events pending
  std::size_t ahead_ = 0, ahead_end_ = 0;
  std::size_t size_ = 0;
};

}  // namespace dtsim::sim
