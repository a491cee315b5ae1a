// sim::Engine: the discrete-event core. Simulated time is a double in seconds, on the
// engine's time grid when it has one (time_grid.hpp: durations added through after() or
// time_grid().later() are whole ticks, so sums of times are exact).
//
// Events fire in order of (time, insertion sequence): ties go to the event scheduled
// first, so a run is a deterministic function of its inputs. An event either resumes a
// coroutine, calls a function, fires a Completion, or calls a Handler with an argument.
// Rank programs are Tasks spawned on the engine; run() fires events until none are
// left, then reports ranks that never finished (a deadlock in the simulated program)
// instead of hanging.
//
// The queue (event_queue.hpp) holds self-contained 32-byte entries (time, sequence, what
// to resume or fire), so scheduling and firing a coroutine, a Completion or a Handler
// allocates nothing and needs no lookup. It is held by pointer so that only the engine's
// own source (and the queue's tests) include its header: an edit to the queue rebuilds
// the engine, not its users. trace_hash() folds every fired event into a running hash so
// two runs can be checked for the same event order.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/task.hpp"
#include "sim/time_grid.hpp"

namespace dtsim::sim {

class Completion;
class EventQueue;
struct QueuedEvent;
enum class EventKind : std::uint64_t;

// Thrown by a model that finds, part-way through a run, that a shortcut it took cannot
// be kept (net::ReuseConflict: a replayed collective met cross traffic): the run must
// start again without it. run() passes it through unchanged, also from a root program,
// whose other failures it prefixes with the program's name.
class RunRestart : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
struct RootState {
  std::string name;
  Task<void> task;
  bool* any_failed;  // the engine's flag: a failed root ends the run
  bool finished = false;
  std::exception_ptr error;
};
}  // namespace detail

class Engine {
 public:
  using Callback = std::function<void()>;
  // An object the engine calls with a 62-bit argument: for models that schedule millions
  // of events (a transport's messages), one virtual call and no std::function to store.
  class Handler {
   public:
    virtual ~Handler() = default;
    virtual void on_event(std::uint64_t arg) = 0;
  };

  Engine();
  explicit Engine(TimeGrid grid);
  ~Engine();
  // Scheduled coroutines, Completions and root programs point back at this engine.
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  double now() const noexcept { return now_; }
  const TimeGrid& time_grid() const noexcept { return grid_; }
  // The time `d` seconds (>= 0) from now, as the simulation computes it: the duration
  // rounded to the grid's ticks below its horizon (time_grid.hpp).
  double after(double d) const noexcept { return grid_.later(now_, d); }
  std::uint64_t events_fired() const noexcept { return fired_; }
  // Events ever scheduled (and sequences reserved): unchanged between two calls when
  // nothing was scheduled in between, so an event scheduled then would have followed the
  // last one directly.
  std::uint64_t events_scheduled() const noexcept { return next_seq_; }
  std::size_t events_pending() const noexcept;

  // A running hash of every event fired so far: its time, its insertion sequence and
  // its kind (resume / call / completion / handler), in firing order. Equal for two runs
  // of the same program exactly when (up to hash collisions) they fired the same events
  // in the same order at the same times.
  std::uint64_t trace_hash() const noexcept { return trace_hash_; }

  // Schedules `h` to resume at absolute time `t` (finite, t >= now()).
  void resume_at(double t, std::coroutine_handle<> h);
  // Schedules `fn` to run at absolute time `t` (finite, t >= now()).
  void call_at(double t, Callback fn);
  // Schedules handler.on_event(arg) at absolute time `t`; `arg` < 2^62. The handler must
  // outlive the event (a dropped event is simply not called).
  void call_at(double t, Handler& handler, std::uint64_t arg);

  // An event at the current time whose place is taken now and which is scheduled later,
  // or not at all: a model that may do at the end of this event what it would otherwise
  // do in one of its own (a flow model's solve, when nothing else is due at this time)
  // takes its sequence now, and schedules the event in that place only if it must.
  // Either way, every other event keeps its place relative to the others.
  std::uint64_t reserve_sequence() noexcept { return next_seq_++; }
  // Schedules handler.on_event(arg) at the current time with the reserved `seq`: after
  // the events scheduled before the reservation, before those scheduled since.
  void call_now_reserved(std::uint64_t seq, Handler& handler, std::uint64_t arg);
  // Whether an event is due at the current time, besides the one firing: exact, so that
  // a model's choice by it (schedule an event or not) is the same whatever the queue's
  // layout.
  bool events_pending_now() const noexcept;

  // Starts `task` at the current time as a root program named `name` (e.g. "rank 3").
  void spawn(Task<void> task, std::string name);

  // Fires events until the queue is empty. Rethrows the first exception a root program
  // raised (prefixed with its name); throws if a root program never finished. In both
  // cases the unfinished programs are destroyed before run() throws, so their frames
  // never outlive what they refer to.
  void run();

  // Awaitable: suspends the caller for `dt` simulated seconds.
  auto sleep_for(double dt) {
    struct Awaiter {
      Engine& engine;
      double dt;
      bool await_ready() const noexcept { return dt <= 0.0; }
      void await_suspend(std::coroutine_handle<> h) { engine.resume_at(engine.after(dt), h); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this, dt};
  }

 private:
  friend class Completion;

  void schedule(double t, EventKind kind, void* target, std::uint64_t callback = 0);
  void fire(const QueuedEvent& e);
  // Drops every pending event without firing it (callbacks destroyed, Completions
  // released).
  void drop_pending() noexcept;

  void rethrow_first_failure();
  void abandon() noexcept;

  double now_ = 0.0;
  std::uint64_t next_seq_ = 0;  // events ever scheduled: the sequence of the next one
  std::uint64_t fired_ = 0;
  std::uint64_t trace_hash_ = 0x243F6A8885A308D3ull;
  std::unique_ptr<EventQueue> queue_;
  // Functions of pending call events, by index, recycled through a free list.
  std::vector<Callback> callbacks_;
  std::vector<std::uint64_t> free_callbacks_;
  std::deque<detail::RootState> roots_;  // a deque: promises point at its elements
  bool failed_ = false;
  // Read once per scheduled duration (after()): after the hot members, which keep their
  // cache lines.
  TimeGrid grid_;
};

// A one-shot signal a coroutine can await; fired by the engine at a chosen time.
// Used for the completion of an emulated message or collective. Always held by
// shared_ptr (create with std::make_shared): a scheduled firing keeps it alive.
class Completion : public std::enable_shared_from_this<Completion> {
 public:
  explicit Completion(Engine& engine) : engine_(&engine) {}
  // Identity matters: the engine and the waiter hold its address. (GCC 12 silently awaits
  // a copy for `co_await *ptr` on a copyable awaitable; deleting these turns that into a
  // compile error. Await a named reference instead.)
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  bool done() const noexcept { return done_; }
  double time() const noexcept { return time_; }

  // At simulated time `t`: run `on_fire` (e.g. deliver received data), mark done, and
  // resume the waiter if one is suspended. A Completion fires once: a second fire_at
  // throws std::logic_error.
  void fire_at(double t, Engine::Callback on_fire = {});

  bool await_ready() const noexcept { return done_; }
  void await_suspend(std::coroutine_handle<> h);
  void await_resume() const noexcept {}

 private:
  friend class Engine;
  void fire();
  void cancel() noexcept;

  Engine* engine_;
  bool done_ = false;
  double time_ = 0.0;
  std::coroutine_handle<> waiter_;
  Engine::Callback on_fire_;
  // Set while a firing is scheduled, so the engine's entry never dangles; released when
  // it fires or the engine drops it.
  std::shared_ptr<Completion> keep_alive_;
};

}  // namespace dtsim::sim
