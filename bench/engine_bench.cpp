// Engine throughput: schedule + fire + resume of trivial coroutine events.
//
// `pending` programs each sleep for a pseudo-random interval in a loop, so the queue
// holds `pending` events at all times. BM_BaselineHeap runs the same workload on a plain
// std::priority_queue of coroutine handles: the ratio of the two, from one run on one
// machine, is the figure to watch. BM_Engine reports it as the counter `vs_baseline`
// (engine events/s over baseline events/s, > 1 when the engine is faster), timing one
// baseline run right after each engine run so that both see the same machine load.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <coroutine>
#include <cstdint>
#include <ctime>
#include <queue>
#include <vector>

#include "sim/engine.hpp"
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

constexpr std::int64_t kEventsPerIteration = 1 << 18;

std::int64_t wakeups_for(std::int64_t pending) { return std::max<std::int64_t>(1, kEventsPerIteration / pending); }

void run_engine(std::int64_t pending, std::int64_t wakeups) {
  Engine engine;
  for (std::int64_t p = 0; p < pending; ++p) engine.spawn(sleeper(engine, p, wakeups), "sleeper");
  engine.run();
  benchmark::DoNotOptimize(engine.events_fired());
}

void run_baseline(std::int64_t pending, std::int64_t wakeups) {
  BaselineQueue q;
  std::vector<Task<void>> tasks;
  for (std::int64_t p = 0; p < pending; ++p) {
    tasks.push_back(baseline_sleeper(q, p, wakeups));
    q.heap.push({0.0, tasks.back().handle()});
  }
  while (!q.heap.empty()) {
    auto e = q.heap.top();
    q.heap.pop();
    q.now = e.time;
    e.h.resume();
  }
}

// Processor time, not wall time: on a shared machine, time spent descheduled counts
// against neither side.
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

void BM_Engine(benchmark::State& state) {
  const auto pending = state.range(0);
  const auto wakeups = wakeups_for(pending);
  double engine_s = 0.0, baseline_s = 0.0;
  for (auto _ : state) {
    const double t0 = cpu_seconds();
    run_engine(pending, wakeups);
    const double t1 = cpu_seconds();
    state.PauseTiming();
    run_baseline(pending, wakeups);
    baseline_s += cpu_seconds() - t1;
    engine_s += t1 - t0;
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * pending * (wakeups + 1));
  if (engine_s > 0.0) state.counters["vs_baseline"] = baseline_s / engine_s;
}
BENCHMARK(BM_Engine)->Arg(16)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

void BM_BaselineHeap(benchmark::State& state) {
  const auto pending = state.range(0);
  const auto wakeups = wakeups_for(pending);
  for (auto _ : state) run_baseline(pending, wakeups);
  state.SetItemsProcessed(state.iterations() * pending * (wakeups + 1));
}
BENCHMARK(BM_BaselineHeap)->Arg(16)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

}  // namespace
