// sim::Engine: the discrete-event core. Simulated time is a double in seconds.
//
// Events fire in order of (time, insertion sequence): ties go to the event scheduled
// first, so a run is a deterministic function of its inputs. An event either resumes a
// coroutine or calls a function. Rank programs are Tasks spawned on the engine; run()
// fires events until none are left, then reports ranks that never finished (a deadlock
// in the simulated program) instead of hanging.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "sim/task.hpp"

namespace dtsim::sim {

class Engine {
 public:
  using Callback = std::function<void()>;

  double now() const noexcept { return now_; }
  std::uint64_t events_fired() const noexcept { return fired_; }

  // Schedules `h` to resume at absolute time `t` (t >= now()).
  void resume_at(double t, std::coroutine_handle<> h);
  // Schedules `fn` to run at absolute time `t` (t >= now()).
  void call_at(double t, Callback fn);

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
      void await_suspend(std::coroutine_handle<> h) { engine.resume_at(engine.now() + dt, h); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this, dt};
  }

 private:
  struct Event {
    double time;
    std::uint64_t seq;
    std::coroutine_handle<> resume;  // used when `callback` is empty
    Callback callback;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const noexcept {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  void push(Event e);

  struct Root {
    std::string name;
    bool finished = false;
    std::exception_ptr error;
  };
  Task<void> guard(Task<void> task, std::size_t index);
  void rethrow_first_failure();
  void abandon();

  double now_ = 0.0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t fired_ = 0;
  std::vector<Event> queue_;  // binary heap ordered by Later
  std::vector<Root> roots_;
  std::vector<Task<void>> guards_;
  bool failed_ = false;
};

// A one-shot signal a coroutine can await; fired by the engine at a chosen time.
// Used for the completion of an emulated message or collective. Always held by
// shared_ptr (create with std::make_shared): a scheduled firing keeps it alive.
class Completion : public std::enable_shared_from_this<Completion> {
 public:
  explicit Completion(Engine& engine) : engine_(&engine) {}

  bool done() const noexcept { return done_; }
  double time() const noexcept { return time_; }

  // At simulated time `t`: run `on_fire` (e.g. deliver received data), mark done, and
  // resume the waiter if one is suspended.
  void fire_at(double t, Engine::Callback on_fire = {});

  bool await_ready() const noexcept { return done_; }
  void await_suspend(std::coroutine_handle<> h);
  void await_resume() const noexcept {}

 private:
  Engine* engine_;
  bool done_ = false;
  double time_ = 0.0;
  std::coroutine_handle<> waiter_;
};

}  // namespace dtsim::sim
