// sim::Engine, sim::EventQueue and sim::Task: event order (against a plain priority
// queue as the oracle), simulated time, coroutine composition, the trace hash, and how
// failures and deadlocks of rank programs are reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/event_queue.hpp"
#include "sim/event_queue_inline.hpp"
#include "sim/task.hpp"

namespace dtsim::sim {
namespace {

// Events fire in time order; events at the same time fire in the order they were
// scheduled, whatever order the times were inserted in.
TEST(Engine, FiresByTimeThenInsertionOrder) {
  Engine engine;
  std::vector<std::string> fired;
  engine.call_at(2.0, [&] { fired.push_back("b@2"); });
  engine.call_at(1.0, [&] { fired.push_back("a@1"); });
  engine.call_at(2.0, [&] { fired.push_back("c@2"); });
  engine.call_at(0.5, [&] { fired.push_back("z@0.5"); });
  engine.run();
  EXPECT_EQ(fired, (std::vector<std::string>{"z@0.5", "a@1", "b@2", "c@2"}));
  EXPECT_DOUBLE_EQ(engine.now(), 2.0);
  EXPECT_EQ(engine.events_fired(), 4u);
}

// A Handler is called with its argument at its time, interleaved with other events in
// the same (time, insertion) order; arguments need at most 62 bits.
TEST(Engine, CallsHandlersInOrder) {
  struct Recorder : Engine::Handler {
    Engine* engine = nullptr;
    std::vector<std::pair<double, std::uint64_t>> calls;
    void on_event(std::uint64_t arg) override { calls.push_back({engine->now(), arg}); }
  };
  Engine engine;
  Recorder recorder;
  recorder.engine = &engine;
  engine.call_at(2.0, recorder, 7);
  engine.call_at(1.0, [&] { engine.call_at(1.0, recorder, (std::uint64_t{1} << 62) - 1); });
  engine.call_at(2.0, recorder, 3);
  EXPECT_THROW(engine.call_at(3.0, recorder, std::uint64_t{1} << 62), std::invalid_argument);
  engine.run();
  EXPECT_EQ(recorder.calls, (std::vector<std::pair<double, std::uint64_t>>{
                                {1.0, (std::uint64_t{1} << 62) - 1}, {2.0, 7}, {2.0, 3}}));
}

// A sequence reserved during an event, and scheduled at that time only later: the event
// fires after those scheduled before the reservation (pending from earlier times too)
// and before those scheduled since; a sequence not reserved is rejected. Whether an
// event is due at the current time is known at every step.
TEST(Engine, ReservedSequenceKeepsItsPlace) {
  struct Recorder : Engine::Handler {
    std::vector<std::string>* fired = nullptr;
    void on_event(std::uint64_t arg) override { fired->push_back("reserved " + std::to_string(arg)); }
  };
  Engine engine;
  std::vector<std::string> fired;
  Recorder recorder;
  recorder.fired = &fired;
  engine.call_at(1.0, [&] {
    fired.push_back("first");
    EXPECT_TRUE(engine.events_pending_now());  // "before"
    const auto seq = engine.reserve_sequence();
    engine.call_at(1.0, [&] { fired.push_back("after"); });
    engine.call_at(2.0, [&] {
      fired.push_back("later");
      EXPECT_FALSE(engine.events_pending_now());
      const auto unused = engine.reserve_sequence();  // never scheduled: nothing fires for it
      EXPECT_THROW(engine.call_now_reserved(unused + 1, recorder, 0), std::logic_error);
    });
    engine.call_at(1.0, [&] { fired.push_back("after 2"); });
    engine.call_now_reserved(seq, recorder, 7);
  });
  engine.call_at(1.0, [&] {
    fired.push_back("before");
    EXPECT_TRUE(engine.events_pending_now());  // the reserved one and those after it
  });
  engine.call_at(3.0, [&] {
    fired.push_back("last");
    EXPECT_FALSE(engine.events_pending_now());
  });
  engine.run();
  EXPECT_EQ(fired, (std::vector<std::string>{"first", "before", "reserved 7", "after", "after 2", "later", "last"}));
  EXPECT_EQ(engine.events_fired(), 7u);
}

TEST(Engine, RejectsEventsInThePast) {
  Engine engine;
  engine.call_at(1.0, [&] { EXPECT_THROW(engine.call_at(0.5, [] {}), std::logic_error); });
  engine.run();
}

// NaN compares false with everything and would corrupt the queue's order, and infinity
// is "never", not a time: both rejected like a time in the past.
TEST(Engine, RejectsNaNAndInfiniteTimes) {
  Engine engine;
  EXPECT_THROW(engine.call_at(std::numeric_limits<double>::quiet_NaN(), [] {}), std::logic_error);
  EXPECT_THROW(engine.call_at(std::numeric_limits<double>::infinity(), [] {}), std::logic_error);
  EXPECT_EQ(engine.events_pending(), 0u);
  engine.call_at(1.0, [] {});
  EXPECT_EQ(engine.events_pending(), 1u);
}

// A deterministic workload with many ties, events scheduled from inside events (some at
// the current time), and thousands pending at once: every event's follow-up delay is a
// function of its own id, so the set of events is fixed and the firing order is pinned
// down by (time, insertion order). A plain priority queue over (time, id) is the oracle.
struct Workload {
  static constexpr int kInitial = 3000;
  static constexpr int kTotal = 20000;
  // Delays on a coarse grid, so that equal times are common; every 7th is zero.
  static double delay(std::uint64_t id) {
    std::uint64_t x = id * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return id % 7 == 0 ? 0.0 : static_cast<double>(x % 16) * 0.125;
  }
};

using Fired = std::vector<std::pair<double, std::uint64_t>>;

Fired oracle_order() {
  using Item = std::pair<double, std::uint64_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  std::uint64_t next_id = 0;
  for (int i = 0; i < Workload::kInitial; ++i, ++next_id) queue.push({Workload::delay(next_id) * 3.0, next_id});
  Fired fired;
  while (!queue.empty()) {
    const auto [t, id] = queue.top();
    queue.pop();
    fired.push_back({t, id});
    if (next_id < Workload::kTotal) {
      queue.push({t + Workload::delay(id), next_id});
      ++next_id;
    }
  }
  return fired;
}

Fired engine_order(Engine& engine) {
  Fired fired;
  std::uint64_t next_id = 0;
  // Each event records itself and schedules one follow-up, like a rank that sleeps.
  struct Event {
    Engine& engine;
    Fired& fired;
    std::uint64_t& next_id;
    std::uint64_t id;
    void operator()() const {
      fired.push_back({engine.now(), id});
      if (next_id < Workload::kTotal) engine.call_at(engine.now() + Workload::delay(id), Event{engine, fired, next_id, next_id++});
    }
  };
  for (int i = 0; i < Workload::kInitial; ++i, ++next_id)
    engine.call_at(Workload::delay(next_id) * 3.0, Event{engine, fired, next_id, next_id});
  engine.run();
  return fired;
}

TEST(Engine, MatchesAPlainPriorityQueueOnAHeavyWorkload) {
  const Fired want = oracle_order();
  ASSERT_EQ(want.size(), static_cast<std::size_t>(Workload::kTotal));
  Engine engine;
  EXPECT_EQ(engine_order(engine), want);
  EXPECT_EQ(engine.events_fired(), static_cast<std::uint64_t>(Workload::kTotal));
  EXPECT_EQ(engine.events_pending(), 0u);
}

Task<int> add_after(Engine& engine, double dt, int a, int b) {
  co_await engine.sleep_for(dt);
  co_return a + b;
}

Task<void> program(Engine& engine, std::vector<double>& wakeups, int& sum) {
  wakeups.push_back(engine.now());
  sum = co_await add_after(engine, 1.5, 2, 3);  // nested task returning a value
  wakeups.push_back(engine.now());
  co_await engine.sleep_for(0.25);
  wakeups.push_back(engine.now());
}

// A rank program is sequential code: sleeping advances its simulated clock by exactly dt.
TEST(Engine, CoroutinesSleepInSimulatedTime) {
  Engine engine;
  std::vector<double> wakeups;
  int sum = 0;
  engine.spawn(program(engine, wakeups, sum), "rank 0");
  engine.run();
  EXPECT_EQ(sum, 5);
  EXPECT_EQ(wakeups, (std::vector<double>{0.0, 1.5, 1.75}));
}

Task<void> interleaved(Engine& engine, int id, double period, std::vector<int>& log) {
  for (int i = 0; i < 3; ++i) {
    co_await engine.sleep_for(period);
    log.push_back(id);
  }
}

// Two programs wake at 1,2,3 and 1.5,3,4.5; the tie at t=3 goes to the one that
// scheduled first (program 0 scheduled its t=3 wake-up at t=2, program 1 at t=1.5).
TEST(Engine, InterleavesProgramsDeterministically) {
  Engine engine;
  std::vector<int> log;
  engine.spawn(interleaved(engine, 0, 1.0, log), "rank 0");
  engine.spawn(interleaved(engine, 1, 1.5, log), "rank 1");
  engine.run();
  EXPECT_EQ(log, (std::vector<int>{0, 1, 0, 1, 0, 1}));
}

Task<void> failing(Engine& engine) {
  co_await engine.sleep_for(1.0);
  throw std::runtime_error("peer sent garbage");
}

Task<void> waits_forever(std::shared_ptr<Completion> never) {
  Completion& c = *never;  // named: see Completion's deleted copy constructor
  co_await c;
}

// A failing program ends the run with its name and message, even though its peer is
// still waiting: no hang.
TEST(Engine, ReportsTheFailingProgram) {
  Engine engine;
  auto never = std::make_shared<Completion>(engine);
  engine.spawn(waits_forever(never), "rank 0");
  engine.spawn(failing(engine), "rank 1");
  try {
    engine.run();
    FAIL() << "run() should throw";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 1: peer sent garbage");
  }
}

// Programs waiting on something nobody will complete are a deadlock, reported by name.
// (Each waits on its own Completion: one Completion takes one waiter.)
TEST(Engine, ReportsDeadlockedPrograms) {
  Engine engine;
  engine.spawn(waits_forever(std::make_shared<Completion>(engine)), "rank 0");
  engine.spawn(waits_forever(std::make_shared<Completion>(engine)), "rank 3");
  try {
    engine.run();
    FAIL() << "run() should throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocked"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0, rank 3"), std::string::npos) << e.what();
  }
}

Task<void> await_completion(Completion& c, double& resumed_at, Engine& engine) {
  co_await c;
  resumed_at = engine.now();
}

// A Completion resumes its waiter at the time it fires and runs its action first.
TEST(Completion, ResumesWaiterAtFireTime) {
  Engine engine;
  auto c = std::make_shared<Completion>(engine);
  double resumed_at = -1.0;
  bool action_ran = false;
  engine.spawn(await_completion(*c, resumed_at, engine), "rank 0");
  c->fire_at(3.25, [&] { action_ran = true; });
  engine.run();
  EXPECT_TRUE(action_ran);
  EXPECT_TRUE(c->done());
  EXPECT_DOUBLE_EQ(resumed_at, 3.25);
}

// The queue on its own, against a plain priority queue, under time distributions that
// stress its buckets: bursts at one time, zero delays, spreads near the smallest
// doubles, far-future outliers, and mixes of all of these, with pushes interleaved with
// pops (never before the last popped time, as the engine guarantees).
TEST(EngineQueue, PopsInExactOrderUnderAdversarialTimes) {
  std::mt19937_64 rng(12345);
  for (int scenario = 0; scenario < 6; ++scenario) {
    EventQueue queue;
    using Item = std::pair<double, std::uint64_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> oracle;
    std::uint64_t seq = 0;
    double now = 0.0;
    auto delay = [&]() -> double {
      const int pick = scenario < 5 ? scenario : static_cast<int>(rng() % 5);
      switch (pick) {
        case 0: return 0.0;                                                        // bursts at one time
        case 1: return std::uniform_real_distribution<double>(0.0, 1.0)(rng);      // uniform
        case 2: return static_cast<double>(rng() % 4) * 5e-324;                    // denormal steps
        case 3: return rng() % 50 == 0 ? 1e12 : static_cast<double>(rng() % 3);    // outliers and ties
        default: return std::ldexp(1.0, static_cast<int>(rng() % 200) - 100);      // many scales
      }
    };
    auto push = [&] {
      const double t = now + delay();
      queue.push(QueuedEvent{std::bit_cast<std::uint64_t>(t), seq, nullptr, 0});
      oracle.push({t, seq});
      ++seq;
    };
    // The number pending swings between a handful and thousands, so the queue goes from
    // a plain heap to a calendar and back, with pushes all along.
    for (int i = 0; i < 30; ++i) push();
    for (int step = 0; step < 30000 && !oracle.empty(); ++step) {
      ASSERT_EQ(queue.size(), oracle.size());
      const QueuedEvent got = queue.pop();
      const auto [t, id] = oracle.top();
      oracle.pop();
      ASSERT_EQ(std::bit_cast<double>(got.time_bits), t) << "scenario " << scenario << " step " << step;
      ASSERT_EQ(got.seq, id) << "scenario " << scenario << " step " << step;
      now = t;
      const std::size_t target = (step / 5000) % 2 == 0 ? 3000 : 10;
      const auto pushes = oracle.size() < target ? 2 : rng() % 2;
      for (std::uint64_t k = 0; k < pushes; ++k) push();
    }
    EXPECT_EQ(queue.size(), oracle.size());
  }
}

// The steady state of a hold model (every pop pushes one event a random delay ahead),
// at sizes on both sides of the queue's switch between long and short epochs, with
// bursts at one time and zero delays mixed in; for_each sees exactly the pending events,
// and clear() starts afresh.
TEST(EngineQueue, HoldModelKeepsExactOrderAcrossEpochLengths) {
  std::mt19937_64 rng(777);
  for (const std::size_t pending : {100u, 1000u, 4000u, 5000u, 20000u}) {
    EventQueue queue;
    using Item = std::pair<std::uint64_t, std::uint64_t>;  // (time bits, sequence)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> oracle;
    std::uint64_t seq = 0;
    double now = 0.0;
    auto push = [&](double t) {
      const auto bits = std::bit_cast<std::uint64_t>(t);
      queue.push(QueuedEvent{bits, seq, nullptr, 0});
      oracle.push({bits, seq});
      ++seq;
    };
    for (std::size_t i = 0; i < pending; ++i) push(std::uniform_real_distribution<double>(0.0, 1.0)(rng));
    for (std::size_t step = 0; step < 8 * pending; ++step) {
      const QueuedEvent got = queue.pop();
      ASSERT_EQ(got.time_bits, oracle.top().first) << pending << " step " << step;
      ASSERT_EQ(got.seq, oracle.top().second) << pending << " step " << step;
      oracle.pop();
      now = std::bit_cast<double>(got.time_bits);
      const auto pick = rng() % 64;
      if (pick == 0) {
        for (int k = 0; k < 50; ++k) push(now + 0.25);  // a burst at one future time
        for (int k = 0; k < 50; ++k) queue.pop(), oracle.pop();
      } else if (pick == 1) {
        push(now);  // a zero delay
      } else {
        push(now + std::uniform_real_distribution<double>(0.0, 1.0)(rng));
      }
    }
    ASSERT_EQ(queue.size(), oracle.size());
    std::vector<Item> seen, expected;
    queue.for_each([&](const QueuedEvent& e) { seen.push_back({e.time_bits, e.seq}); });
    for (; !oracle.empty(); oracle.pop()) expected.push_back(oracle.top());
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, expected);
    queue.clear();
    EXPECT_TRUE(queue.empty());
    queue.push(QueuedEvent{std::bit_cast<std::uint64_t>(2.0), 1, nullptr, 0});
    queue.push(QueuedEvent{std::bit_cast<std::uint64_t>(1.0), 2, nullptr, 0});
    EXPECT_EQ(queue.pop().seq, 2u);
    EXPECT_EQ(queue.pop().seq, 1u);
    EXPECT_TRUE(queue.empty());
  }
}

// Large epochs keep the events of their open buckets inline (8 slots each) and list the
// rest, and those of later blocks in chunk lists until the block opens (20,000 pending
// make about 150 blocks of 128 buckets). Exercised here: blocks opening as the current
// bucket nears them; bursts into one future bucket overflow its slots; bursts into the
// current bucket grow the heap until it is spread over a new epoch, slots and lists
// alike; events several epochs ahead wait in far_; the queue shrinks to a tenth and
// grows past twice its size. Order stays exact throughout, and for_each sees exactly the
// pending events midway.
TEST(EngineQueue, LargeEpochsKeepExactOrderThroughSlotOverflowAndSpreads) {
  std::mt19937_64 rng(2026);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  EventQueue queue;
  using Item = std::pair<std::uint64_t, std::uint64_t>;  // (time bits, sequence)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> oracle;
  std::uint64_t seq = 0;
  auto push = [&](double t) {
    const auto bits = std::bit_cast<std::uint64_t>(t);
    queue.push(QueuedEvent{bits, seq, nullptr, 0});
    oracle.push({bits, seq});
    ++seq;
  };
  for (int i = 0; i < 20000; ++i) push(unit(rng));
  for (int step = 0; step < 120000; ++step) {
    const QueuedEvent got = queue.pop();
    ASSERT_EQ(got.time_bits, oracle.top().first) << "step " << step;
    ASSERT_EQ(got.seq, oracle.top().second) << "step " << step;
    oracle.pop();
    const double now = std::bit_cast<double>(got.time_bits);
    if (step % 5000 == 1000) {
      for (int k = 0; k < 100; ++k) push(now + 0.5);  // one future bucket, past its slots
    } else if (step % 20000 == 3000) {
      for (int k = 1; k <= 8000; ++k) push(now + 1e-12 * k);  // the current bucket: a heap to spread
    } else if (step == 60000) {
      std::vector<Item> seen, expected;
      queue.for_each([&](const QueuedEvent& e) { seen.push_back({e.time_bits, e.seq}); });
      auto copy = oracle;
      for (; !copy.empty(); copy.pop()) expected.push_back(copy.top());
      std::sort(seen.begin(), seen.end());
      ASSERT_EQ(seen, expected);
    }
    // Phases of 20,000 pops: steady, shrinking to 2,000, growing to 50,000.
    const int phase = (step / 20000) % 3;
    const int pushes = phase == 0 ? 1 : phase == 1 ? (oracle.size() > 2000 ? 0 : 1) : (oracle.size() < 50000 ? 2 : 1);
    for (int k = 0; k < pushes; ++k) push(now + (rng() % 100 == 0 ? 3.0 + unit(rng) : unit(rng)));
  }
  EXPECT_EQ(queue.size(), oracle.size());
  while (!oracle.empty()) {
    const QueuedEvent got = queue.pop();
    ASSERT_EQ(got.time_bits, oracle.top().first);
    ASSERT_EQ(got.seq, oracle.top().second);
    oracle.pop();
  }
  EXPECT_TRUE(queue.empty());
}

// A burst at one time makes an epoch whose buckets are infinitely narrow; when the
// queue then shrinks to a plain heap, a push between the pending times must still go
// before them.
TEST(EngineQueue, OrdersPushesAfterABurstShrinksToAHeap) {
  EventQueue queue;
  std::uint64_t seq = 0;
  auto push = [&](double t) { queue.push(QueuedEvent{std::bit_cast<std::uint64_t>(t), seq++, nullptr, 0}); };
  auto pop_time = [&] { return std::bit_cast<double>(queue.pop().time_bits); };
  for (int i = 0; i < 100; ++i) push(0.0);
  EXPECT_EQ(pop_time(), 0.0);
  for (int i = 0; i < 10; ++i) push(5.0);
  for (int i = 0; i < 99; ++i) ASSERT_EQ(pop_time(), 0.0);
  push(3.0);
  EXPECT_EQ(pop_time(), 3.0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pop_time(), 5.0);
  EXPECT_TRUE(queue.empty());
}

// An event pushed at the time of the last pop (a zero delay) goes after the events
// already pending at that time, which were pushed before it, and before every later
// one; events pushed in increasing order after everything in the current bucket, and
// one pushed between them, keep their order too.
TEST(EngineQueue, ZeroDelaysFollowEventsPendingAtTheSameTime) {
  EventQueue queue;
  std::uint64_t seq = 0;
  auto push = [&](double t) { queue.push(QueuedEvent{std::bit_cast<std::uint64_t>(t), seq++, nullptr, 0}); };
  push(1.0);  // seq 0
  push(1.0);  // seq 1
  push(2.0);  // seq 2
  EXPECT_EQ(queue.pop().seq, 0u);
  push(1.0);  // seq 3: after seq 1, pending at the same time from before
  push(1.5);  // seq 4
  push(1.5);  // seq 5
  push(1.2);  // seq 6: before both
  std::vector<std::uint64_t> order;
  while (!queue.empty()) order.push_back(queue.pop().seq);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{1, 3, 6, 4, 5, 2}));
}

// Whether an event is pending at the last pop's time is known exactly, wherever the
// pending events are: in the active run, in later buckets, beyond the epoch, or pushed
// at that time since. (The flow model schedules a solve event or not by it, so a
// conservative "maybe" made the event sequence depend on the bucket layout.)
TEST(EngineQueue, KnowsExactlyWhetherAnEventIsPendingAtTheLastPop) {
  EventQueue queue;
  std::uint64_t seq = 0;
  auto push = [&](double t) { queue.push(QueuedEvent{std::bit_cast<std::uint64_t>(t), seq++, nullptr, 0}); };
  for (int i = 1; i <= 200; ++i) push(i);  // a calendar epoch over [1, 200]
  EXPECT_TRUE(queue.pending_at_last_pop());  // before the first pop: cannot tell
  queue.pop();
  EXPECT_FALSE(queue.pending_at_last_pop());  // the next is at 2
  push(1.0);
  EXPECT_TRUE(queue.pending_at_last_pop());
  queue.pop();
  while (queue.size() > 1) queue.pop();
  const double last = std::bit_cast<double>(queue.pop().time_bits);
  ASSERT_EQ(last, 200.0);
  // Empty now, its run and heap too: a push far beyond the epoch waits in far_, one
  // inside it in a later bucket; neither is at the last pop's time.
  push(10'000.0);
  EXPECT_FALSE(queue.pending_at_last_pop());
  push(200.5);
  EXPECT_FALSE(queue.pending_at_last_pop());
  push(200.0);
  EXPECT_TRUE(queue.pending_at_last_pop());
  std::vector<double> rest;
  while (!queue.empty()) rest.push_back(std::bit_cast<double>(queue.pop().time_bits));
  EXPECT_EQ(rest, (std::vector<double>{200.0, 200.5, 10'000.0}));
}

// Times whose mean rounds to the smallest of them (256 values near 2^52, whose sum is
// near 2^60 where doubles are 256 apart): the queue must not take them for a burst at
// one time, or an event pushed between them would come out late.
TEST(EngineQueue, TellsNearlyEqualTimesApart) {
  EventQueue queue;
  std::uint64_t seq = 0;
  auto push = [&](double t) { queue.push(QueuedEvent{std::bit_cast<std::uint64_t>(t), seq++, nullptr, 0}); };
  auto pop_time = [&] { return std::bit_cast<double>(queue.pop().time_bits); };
  const double base = 0x1p52;  // integers are exact here
  for (int i = 0; i < 255; ++i) push(base);
  push(base + 100.0);
  EXPECT_EQ(pop_time(), base);
  push(base + 50.0);
  for (int i = 0; i < 254; ++i) ASSERT_EQ(pop_time(), base) << i;
  EXPECT_EQ(pop_time(), base + 50.0);
  EXPECT_EQ(pop_time(), base + 100.0);
  EXPECT_TRUE(queue.empty());
}

// Network messages microseconds apart beside compute phases milliseconds away: the
// mean of the pending times is set by the far mode, so an epoch sized by it would put
// the near events, the next to fire, in a few wide buckets. The epoch takes its range
// from the earliest quarter instead (buckets of about a nanosecond here, not near a
// microsecond), and the order stays exact through a hold model in both modes; a single
// mode keeps buckets sized by its mean (a quarter of a microsecond here).
TEST(EngineQueue, BimodalTimesGetBucketsSizedByTheNearMode) {
  std::mt19937_64 rng(4242);
  for (const bool bimodal : {true, false}) {
    EventQueue queue;
    using Item = std::pair<std::uint64_t, std::uint64_t>;  // (time bits, sequence)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> oracle;
    std::uint64_t seq = 0;
    auto push = [&](double t, bool near) {
      queue.push(QueuedEvent{std::bit_cast<std::uint64_t>(t), seq, nullptr, near ? 1u : 0u});
      oracle.push({std::bit_cast<std::uint64_t>(t), seq});
      ++seq;
    };
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    // The control: both halves spread alike over a millisecond.
    auto near_delay = [&] { return bimodal ? 1e-6 * unit(rng) : 1e-3 * unit(rng); };
    auto far_delay = [&] { return bimodal ? 1e-3 + 1e-3 * unit(rng) : 1e-3 * unit(rng); };
    for (int i = 0; i < 2000; ++i) push(near_delay(), true);
    for (int i = 0; i < 2000; ++i) push(far_delay(), false);
    for (int step = 0; step < 40000; ++step) {
      const QueuedEvent got = queue.pop();
      ASSERT_EQ(got.time_bits, oracle.top().first) << bimodal << " step " << step;
      ASSERT_EQ(got.seq, oracle.top().second) << bimodal << " step " << step;
      oracle.pop();
      if (step == 0) {
        if (bimodal) EXPECT_LT(queue.bucket_width(), 1e-8);
        else EXPECT_GT(queue.bucket_width(), 1e-7);
      }
      const double now = std::bit_cast<double>(got.time_bits);
      const bool near = got.aux == 1u;
      push(now + (near ? near_delay() : far_delay()), near);
    }
  }
}

// A small simulated job: ranks that compute for rank-dependent times and then wait on
// a Completion that a "network" callback fires. `skew` perturbs one rank's compute time.
std::uint64_t job_trace_hash(double skew, std::uint64_t* fired = nullptr) {
  Engine engine;
  constexpr int kRanks = 4;
  std::vector<std::shared_ptr<Completion>> done;
  for (int r = 0; r < kRanks; ++r) done.push_back(std::make_shared<Completion>(engine));
  auto rank = [](Engine& e, int r, double compute, std::shared_ptr<Completion> msg) -> Task<void> {
    for (int step = 0; step < 3; ++step) co_await e.sleep_for(compute * (r + 1));
    Completion& m = *msg;
    co_await m;
  };
  for (int r = 0; r < kRanks; ++r) engine.spawn(rank(engine, r, r == 2 ? 1.0 + skew : 1.0, done[r]), "rank");
  engine.call_at(2.0, [&] {
    for (int r = 0; r < kRanks; ++r) done[r]->fire_at(20.0 - r);
  });
  engine.run();
  if (fired) *fired = engine.events_fired();
  return engine.trace_hash();
}

// Two runs of the same program fire the same events in the same order: equal hashes
// (and not merely the untouched initial value).
TEST(TraceHash, IsEqualForTwoRunsOfTheSameProgram) {
  std::uint64_t fired = 0;
  const auto first = job_trace_hash(0.0, &fired);
  EXPECT_EQ(fired, 4u + 12u + 1u + 4u);  // starts, sleeps, the network callback, firings
  EXPECT_EQ(job_trace_hash(0.0), first);
  EXPECT_NE(first, Engine{}.trace_hash());
}

// Moving one event in time by a tiny amount, without changing the order of anything,
// changes the hash; so does changing the order alone.
TEST(TraceHash, ChangesWhenTimesOrOrderChange) {
  const auto base = job_trace_hash(0.0);
  EXPECT_NE(job_trace_hash(1e-12), base);

  // The same events at the same times, scheduled in the opposite order: the one with
  // insertion number 1 now fires first.
  auto two_events = [](bool later_first) {
    Engine engine;
    if (later_first) {
      engine.call_at(2.0, [] {});
      engine.call_at(1.0, [] {});
    } else {
      engine.call_at(1.0, [] {});
      engine.call_at(2.0, [] {});
    }
    engine.run();
    return engine.trace_hash();
  };
  EXPECT_NE(two_events(true), two_events(false));
  EXPECT_EQ(two_events(true), two_events(true));
}

// A scheduled Completion keeps itself alive until it fires; an engine destroyed first
// releases it (and its action) instead of leaking it.
TEST(Completion, ReleasedByAnEngineThatNeverFiresIt) {
  std::weak_ptr<Completion> weak;
  auto action_state = std::make_shared<int>(0);
  {
    Engine engine;
    auto c = std::make_shared<Completion>(engine);
    weak = c;
    c->fire_at(1.0, [action_state] { ++*action_state; });
    c.reset();
    EXPECT_FALSE(weak.expired()) << "the pending firing owns it";
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(*action_state, 0);
  EXPECT_EQ(action_state.use_count(), 1) << "the action was destroyed with it";
}

// A Completion is one-shot: firing it twice is a bug in the caller, reported.
TEST(Completion, RejectsASecondFiring) {
  Engine engine;
  auto c = std::make_shared<Completion>(engine);
  c->fire_at(1.0);
  EXPECT_THROW(c->fire_at(2.0), std::logic_error);
  engine.run();
  EXPECT_TRUE(c->done());
  EXPECT_DOUBLE_EQ(c->time(), 1.0);
  EXPECT_THROW(c->fire_at(3.0), std::logic_error);
}

Task<int> immediate(int x) { co_return x * 2; }
Task<int> chain(int x) {
  int a = co_await immediate(x);
  int b = co_await immediate(a);
  co_return b + 1;
}

// Live backends drive tasks whose awaits never suspend.
TEST(Task, RunBlockingReturnsTheResult) { EXPECT_EQ(run_blocking(chain(5)), 21); }

}  // namespace
}  // namespace dtsim::sim

namespace dtsim::sim {
namespace {

struct SetOnDestroy {
  bool* flag;
  ~SetOnDestroy() { *flag = true; }
};

Task<void> holds_guard(Engine& engine, bool& destroyed) {
  SetOnDestroy guard{&destroyed};
  co_await engine.sleep_for(10.0);
}

// A callback that throws ends the run with its exception, and the programs still
// suspended are destroyed before run() returns, not later when the engine dies (by then
// the objects they point at may be gone).
TEST(Engine, ThrowingCallbackAbandonsSuspendedPrograms) {
  Engine engine;
  bool destroyed = false;
  engine.spawn(holds_guard(engine, destroyed), "rank 0");
  engine.call_at(1.0, [] { throw std::invalid_argument("link 2-3 failed"); });
  EXPECT_THROW(engine.run(), std::invalid_argument);
  EXPECT_TRUE(destroyed);
}

}  // namespace
}  // namespace dtsim::sim
