#include "sim/engine.hpp"
#include "sim/event_queue_inline.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::sim {

namespace {

// An entry written as two 16-byte halves. Left to itself, GCC 12 wrote the entry that
// schedule() pushes to a stack temporary, its time and sequence as one 16-byte store but
// its target and aux as two 8-byte ones, and then copied it into the queue with 16-byte
// loads. A load that spans two stores cannot take its data from the store buffer: it
// waited until those stores, and every older one (cache misses among them), had reached
// the cache. That cost about 5 % of the engine benchmark at 65,536 pending
// (bench/results/engine-and-flow.md); with matching halves the loads are forwarded.
QueuedEvent make_event(std::uint64_t time_bits, std::uint64_t seq, void* target, std::uint64_t aux) noexcept {
#if defined(__SSE2__)
  QueuedEvent e;
  auto* halves = reinterpret_cast<__m128i*>(&e);
  _mm_storeu_si128(halves, _mm_set_epi64x(static_cast<long long>(seq), static_cast<long long>(time_bits)));
  _mm_storeu_si128(halves + 1, _mm_set_epi64x(static_cast<long long>(aux),
                                              static_cast<long long>(reinterpret_cast<std::uintptr_t>(target))));
  return e;
#else
  return QueuedEvent{time_bits, seq, target, aux};
#endif
}

}  // namespace

Engine::Engine() : queue_(std::make_unique<EventQueue>()) {}
Engine::Engine(TimeGrid grid) : queue_(std::make_unique<EventQueue>()), grid_(grid) {}
Engine::~Engine() { abandon(); }

std::size_t Engine::events_pending() const noexcept { return queue_->size(); }
bool Engine::events_pending_now() const noexcept { return queue_->pending_at_last_pop(); }

void Engine::schedule(double t, EventKind kind, void* target, std::uint64_t callback) {
  // Also rejects NaN, which would break the queue's order, and infinity ("never" is not
  // an event).
  if (!(t >= now_) || !std::isfinite(t))
    throw std::logic_error(
        fmt::format("Engine: event scheduled at {} (now {}): times must be finite and not in the past", t, now_));
  // t >= 0 here; adding +0.0 turns -0.0 into +0.0, whose bits order like the double.
  queue_->push(make_event(std::bit_cast<std::uint64_t>(t + 0.0), next_seq_, target,
                         static_cast<std::uint64_t>(kind) | callback << 2));
  ++next_seq_;
}

void Engine::resume_at(double t, std::coroutine_handle<> h) { schedule(t, EventKind::resume, h.address()); }

void Engine::call_at(double t, Callback fn) {
  std::uint64_t index;
  if (free_callbacks_.empty()) {
    index = callbacks_.size();
    callbacks_.push_back(std::move(fn));
  } else {
    index = free_callbacks_.back();
    callbacks_[index] = std::move(fn);
    free_callbacks_.pop_back();
  }
  try {
    schedule(t, EventKind::call, nullptr, index);
  } catch (...) {
    callbacks_[index] = nullptr;
    free_callbacks_.push_back(index);
    throw;
  }
}

void Engine::call_at(double t, Handler& handler, std::uint64_t arg) {
  if (arg >> 62) throw std::invalid_argument(fmt::format("Engine::call_at: handler argument {} needs over 62 bits", arg));
  schedule(t, EventKind::handler, &handler, arg);
}

void Engine::call_now_reserved(std::uint64_t seq, Handler& handler, std::uint64_t arg) {
  if (arg >> 62) throw std::invalid_argument(fmt::format("Engine::call_now_reserved: handler argument {} needs over 62 bits", arg));
  if (seq >= next_seq_) throw std::logic_error("Engine::call_now_reserved: sequence not reserved");
  queue_->push_reserved(QueuedEvent{std::bit_cast<std::uint64_t>(now_ + 0.0), seq, &handler,
                                   static_cast<std::uint64_t>(EventKind::handler) | arg << 2});
}

// Inlined into run(), its only caller: a call per event cost about 2 % of the engine
// benchmark at 1,024 pending.
[[gnu::always_inline]] inline void Engine::fire(const QueuedEvent& e) {
  now_ = std::bit_cast<double>(e.time_bits);
  ++fired_;
  // Order-sensitive: each step is a bijection of the previous hash, so two traces that
  // differ in one event differ in the hash.
  trace_hash_ = (std::rotl(trace_hash_, 29) ^ e.time_bits ^ ((e.seq << 2 | (e.aux & 3)) * 0x9E3779B97F4A7C15ull)) *
                0xBF58476D1CE4E5B9ull;
  switch (e.kind()) {
    case EventKind::resume:
      std::coroutine_handle<>::from_address(e.target).resume();
      break;
    case EventKind::call: {
      // Moved out first: the callback may schedule events that reuse the entry or grow
      // the table under it.
      const auto index = e.aux >> 2;
      Callback fn = std::move(callbacks_[index]);
      callbacks_[index] = nullptr;
      free_callbacks_.push_back(index);
      fn();
      break;
    }
    case EventKind::completion:
      static_cast<Completion*>(e.target)->fire();
      break;
    case EventKind::handler:
      static_cast<Handler*>(e.target)->on_event(e.aux >> 2);
      break;
  }
}

void Engine::drop_pending() noexcept {
  // The queue and the callback table are emptied before anything is released, since
  // releasing runs arbitrary destructors.
  std::vector<Completion*> completions;
  queue_->for_each([&](const QueuedEvent& e) {
    if (e.kind() == EventKind::completion) completions.push_back(static_cast<Completion*>(e.target));
  });
  queue_->clear();
  auto callbacks = std::move(callbacks_);
  callbacks_.clear();
  free_callbacks_.clear();
  for (auto* c : completions) c->cancel();
}

void Engine::spawn(Task<void> task, std::string name) {
  if (!task.valid()) throw std::invalid_argument(fmt::format("Engine::spawn: '{}' is an empty Task", name));
  auto& root = roots_.emplace_back(detail::RootState{std::move(name), std::move(task), &failed_});
  root.task.handle().promise().root = &root;
  resume_at(now_, root.task.handle());
}

void detail::root_finished(RootState& root, std::exception_ptr error) noexcept {
  // Writes the error only on failure: the record is cold, and unlike a read-modify-write
  // of `error` a plain store does not stall on the miss.
  root.finished = true;
  if (error) {
    root.error = std::move(error);
    *root.any_failed = true;
  }
}

void Engine::run() {
  EventQueue& queue = *queue_;
  while (!queue.empty()) {
    // pop() has started loading the coroutine frames (or Completions) of the next
    // events where it knows them (the rest of the bucket's run, a bucket it makes
    // current), so that the misses overlap this event's work instead of stalling the
    // next resume. Asking the queue here for the next event as well cost 4 % of the
    // engine benchmark at 1,024 pending, to load what was mostly on its way already.
    const QueuedEvent next = queue.pop();
    try {
      fire(next);
    } catch (...) {
      // A callback failed (e.g. a link failure that disconnects the network): the run is
      // over, and the suspended programs must go now, while what they refer to still lives.
      abandon();
      throw;
    }
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
  } catch (const RunRestart&) {
    throw;
  } catch (const std::exception& ex) {
    throw std::runtime_error(fmt::format("{}: {}", name, ex.what()));
  }
}

void Engine::abandon() noexcept {
  // Destroy the suspended programs now, while everything they refer to is still alive.
  drop_pending();
  for (auto& root : roots_) root.task = {};
}

void Completion::fire_at(double t, Engine::Callback on_fire) {
  if (done_ || keep_alive_) throw std::logic_error("Completion: fired twice");
  auto self = shared_from_this();
  engine_->schedule(t, EventKind::completion, this);
  keep_alive_ = std::move(self);
  on_fire_ = std::move(on_fire);
}

void Completion::fire() {
  // Locals die in reverse order: the action first, then our own reference, which may be
  // the last one.
  const auto self = std::move(keep_alive_);
  const auto fn = std::move(on_fire_);
  if (fn) fn();
  done_ = true;
  time_ = engine_->now();
  if (auto w = std::exchange(waiter_, {})) w.resume();
}

void Completion::cancel() noexcept {
  const auto self = std::move(keep_alive_);
  const auto fn = std::move(on_fire_);
}

void Completion::await_suspend(std::coroutine_handle<> h) {
  if (waiter_) throw std::logic_error("Completion: a second coroutine awaits the same completion");
  waiter_ = h;
}

}  // namespace dtsim::sim
