// Engine throughput: schedule + fire + resume of trivial coroutine events.
//
// `pending` programs each sleep for a pseudo-random interval in a loop, so the queue
// holds `pending` events at all times. BM_BaselineHeap runs the same workload on a plain
// std::priority_queue of coroutine handles: the ratio of the two, from one run on one
// machine, is the figure to watch. BM_Engine reports it as the counter `vs_baseline`
// (engine events/s over baseline events/s, > 1 when the engine is faster), timing one
// baseline run right after each engine run so that both see the same machine load.
//
// BM_EventQueueHold is the queue alone, without coroutines: the same hold model (pop the
// earliest, push it again a random interval later) on sim::EventQueue and on a
// std::priority_queue of the same 32-byte entries ordered the same way, timed in the
// same iteration (`vs_baseline`). The difference between its ratio and BM_Engine's is
// what resuming the programs costs, their frames' cache misses first.
//
// Steady state, like with like: for both, creating the programs (one coroutine frame
// each) and the first event of each, and destroying them afterwards, happen outside the
// timed region; what is timed is firing every event until the queue is empty. Every
// program wakes at least kMinWakeups times, so the tail in which the queue drains is a
// small share of the events even with 65,536 programs.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <coroutine>
#include <cstdint>
#include <ctime>
#include <memory>
#include <queue>
#include <vector>

#include "sim/engine.hpp"
#include "sim/event_queue.hpp"
#include "sim/event_queue_inline.hpp"
#include "sim/task.hpp"

namespace {

using dtsim::sim::Engine;
using dtsim::sim::Task;

// xorshift: cheap, deterministic intervals in (0, 1].
double next_interval(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return static_cast<double>((state >> 11) + 1) * 0x1.0p-53;
}

Task<void> sleeper(Engine& engine, std::uint64_t seed, std::int64_t wakeups) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (std::int64_t i = 0; i < wakeups; ++i) co_await engine.sleep_for(next_interval(state));
}

// The baseline: the same sleepers on a std::priority_queue with no tie-breaking
// sequence, no callbacks and no failure tracking.
struct BaselineQueue {
  struct Entry {
    double time;
    std::coroutine_handle<> h;
    bool operator>(const Entry& o) const { return time > o.time; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  double now = 0.0;
  auto sleep_for(double dt) {
    struct Awaiter {
      BaselineQueue& q;
      double dt;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { q.heap.push({q.now + dt, h}); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this, dt};
  }
};

Task<void> baseline_sleeper(BaselineQueue& q, std::uint64_t seed, std::int64_t wakeups) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (std::int64_t i = 0; i < wakeups; ++i) co_await q.sleep_for(next_interval(state));
}

constexpr std::int64_t kEventsPerIteration = 1 << 20;
constexpr std::int64_t kMinWakeups = 32;

std::int64_t wakeups_for(std::int64_t pending) {
  return std::max<std::int64_t>(kMinWakeups, kEventsPerIteration / pending);
}

// Processor time, not wall time: on a shared machine, time spent descheduled counts
// against neither side.
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// Each returns the processor seconds of firing every event. Called with the benchmark's
// timing paused; `timed`, when given, has its timing resumed for exactly that part.
struct TimedPart {
  benchmark::State* timed;
  explicit TimedPart(benchmark::State* s) : timed(s) {
    if (timed) timed->ResumeTiming();
  }
  ~TimedPart() {
    if (timed) timed->PauseTiming();
  }
};

double run_engine(benchmark::State* timed, std::int64_t pending, std::int64_t wakeups) {
  auto engine = std::make_unique<Engine>();
  for (std::int64_t p = 0; p < pending; ++p) engine->spawn(sleeper(*engine, p, wakeups), "sleeper");
  double t0, t1;
  {
    TimedPart part(timed);
    t0 = cpu_seconds();
    engine->run();
    t1 = cpu_seconds();
  }
  benchmark::DoNotOptimize(engine->events_fired());
  return t1 - t0;
}

double run_baseline(benchmark::State* timed, std::int64_t pending, std::int64_t wakeups) {
  BaselineQueue q;
  std::vector<Task<void>> tasks;
  tasks.reserve(static_cast<std::size_t>(pending));
  for (std::int64_t p = 0; p < pending; ++p) {
    tasks.push_back(baseline_sleeper(q, p, wakeups));
    q.heap.push({0.0, tasks.back().handle()});
  }
  double t0, t1;
  {
    TimedPart part(timed);
    t0 = cpu_seconds();
    while (!q.heap.empty()) {
      auto e = q.heap.top();
      q.heap.pop();
      q.now = e.time;
      e.h.resume();
    }
    t1 = cpu_seconds();
  }
  return t1 - t0;
}

void BM_Engine(benchmark::State& state) {
  const auto pending = state.range(0);
  const auto wakeups = wakeups_for(pending);
  double engine_s = 0.0, baseline_s = 0.0;
  for (auto _ : state) {
    state.PauseTiming();
    engine_s += run_engine(&state, pending, wakeups);
    // Timed by hand only (the benchmark's timing stays paused): the ratio's denominator.
    baseline_s += run_baseline(nullptr, pending, wakeups);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * pending * (wakeups + 1));
  if (engine_s > 0.0) state.counters["vs_baseline"] = baseline_s / engine_s;
}
BENCHMARK(BM_Engine)->Arg(16)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

void BM_BaselineHeap(benchmark::State& state) {
  const auto pending = state.range(0);
  const auto wakeups = wakeups_for(pending);
  for (auto _ : state) {
    state.PauseTiming();
    run_baseline(&state, pending, wakeups);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * pending * (wakeups + 1));
}
BENCHMARK(BM_BaselineHeap)->Arg(16)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

using dtsim::sim::EventQueue;
using dtsim::sim::QueuedEvent;

QueuedEvent held_event(double t, std::uint64_t seq) {
  return QueuedEvent{std::bit_cast<std::uint64_t>(t), seq, nullptr, 0};
}

// Processor seconds of kEventsPerIteration pops and pushes on a queue of `pending`
// events (filled first, untimed); `Queue` has push(QueuedEvent) and pop() -> QueuedEvent.
// Called with the benchmark's timing paused, like run_engine.
template <typename Queue>
double run_hold(benchmark::State* timed, std::int64_t pending) {
  Queue queue;
  std::uint64_t state = 0x9E3779B97F4A7C15ULL, seq = 0;
  for (std::int64_t p = 0; p < pending; ++p) queue.push(held_event(next_interval(state), seq++));
  double t0, t1;
  {
    TimedPart part(timed);
    t0 = cpu_seconds();
    for (std::int64_t k = 0; k < kEventsPerIteration; ++k) {
      const QueuedEvent e = queue.pop();
      queue.push(held_event(std::bit_cast<double>(e.time_bits) + next_interval(state), seq++));
    }
    t1 = cpu_seconds();
  }
  benchmark::DoNotOptimize(seq);
  return t1 - t0;
}

// The same entries and order (time, then sequence) on std::priority_queue.
struct HeapOfEvents {
  struct Later {
    bool operator()(const QueuedEvent& a, const QueuedEvent& b) const { return EventQueue::key(b) < EventQueue::key(a); }
  };
  std::priority_queue<QueuedEvent, std::vector<QueuedEvent>, Later> heap;
  void push(const QueuedEvent& e) { heap.push(e); }
  QueuedEvent pop() {
    const QueuedEvent e = heap.top();
    heap.pop();
    return e;
  }
};

void BM_EventQueueHold(benchmark::State& state) {
  const auto pending = state.range(0);
  double queue_s = 0.0, heap_s = 0.0;
  for (auto _ : state) {
    state.PauseTiming();
    queue_s += run_hold<EventQueue>(&state, pending);
    heap_s += run_hold<HeapOfEvents>(nullptr, pending);  // the ratio's denominator, timed by hand
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kEventsPerIteration);
  if (queue_s > 0.0) state.counters["vs_baseline"] = heap_s / queue_s;
}
BENCHMARK(BM_EventQueueHold)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

}  // namespace
