#include "sim/engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::sim {

void Engine::push(Event e) {
  if (e.time < now_)
    throw std::logic_error(fmt::format("Engine: event scheduled in the past ({} < now {})", e.time, now_));
  e.seq = next_seq_++;
  queue_.push_back(std::move(e));
  std::push_heap(queue_.begin(), queue_.end(), Later{});
}

void Engine::resume_at(double t, std::coroutine_handle<> h) { push(Event{t, 0, h, {}}); }

void Engine::call_at(double t, Callback fn) { push(Event{t, 0, {}, std::move(fn)}); }

Task<void> Engine::guard(Task<void> task, std::size_t index) {
  try {
    co_await std::move(task);
  } catch (...) {
    roots_[index].error = std::current_exception();
    failed_ = true;
  }
  roots_[index].finished = true;
}

void Engine::spawn(Task<void> task, std::string name) {
  roots_.push_back(Root{std::move(name)});
  guards_.push_back(guard(std::move(task), roots_.size() - 1));
  resume_at(now_, guards_.back().handle());
}

void Engine::run() {
  while (!queue_.empty()) {
    std::pop_heap(queue_.begin(), queue_.end(), Later{});
    Event e = std::move(queue_.back());
    queue_.pop_back();
    now_ = e.time;
    ++fired_;
    if (e.callback)
      e.callback();
    else
      e.resume.resume();
    // A failed root ends the run at once: its peers would otherwise wait forever.
    if (failed_) rethrow_first_failure();
  }
  std::vector<std::string> stuck;
  for (auto& root : roots_)
    if (!root.finished) stuck.push_back(root.name);
  if (!stuck.empty()) {
    abandon();
    throw std::runtime_error(fmt::format(
        "simulation deadlocked at t={:.9g} s: {} never finished (waiting on a message or "
        "collective that no peer completes)",
        now_, fmt::join(stuck, ", ")));
  }
}

void Engine::rethrow_first_failure() {
  std::exception_ptr error;
  std::string name;
  for (auto& root : roots_)
    if (root.error) {
      error = root.error;
      name = root.name;
      break;
    }
  abandon();
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& ex) {
    throw std::runtime_error(fmt::format("{}: {}", name, ex.what()));
  }
}

void Engine::abandon() {
  // Destroy the suspended programs now, while everything they refer to is still alive.
  queue_.clear();
  guards_.clear();
}

void Completion::fire_at(double t, Engine::Callback on_fire) {
  engine_->call_at(t, [self = shared_from_this(), fn = std::move(on_fire), t] {
    if (fn) fn();
    self->done_ = true;
    self->time_ = t;
    if (auto w = std::exchange(self->waiter_, {})) w.resume();
  });
}

void Completion::await_suspend(std::coroutine_handle<> h) {
  if (waiter_) throw std::logic_error("Completion: a second coroutine awaits the same completion");
  waiter_ = h;
}

}  // namespace dtsim::sim
