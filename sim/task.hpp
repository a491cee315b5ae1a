// sim::Task<T>: the coroutine type every rank program, algorithm step and helper returns.
//
// A Task is lazy: it starts when awaited (or when spawned on an Engine / driven by
// run_blocking) and, when it finishes, resumes whoever awaited it by symmetric transfer,
// so deep call chains of coroutines cost no stack. Exceptions thrown inside a Task
// propagate to the awaiting coroutine like ordinary exceptions.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <stdexcept>
#include <utility>

#include "sim/frame_arena.hpp"

namespace dtsim::sim {

template <typename T = void>
class Task;

namespace detail {

// A root program's record in the Engine (defined in engine.hpp). The engine points a
// root Task's promise at it and is told when the program ends, so it needs no wrapper
// coroutine per root.
struct RootState;
void root_finished(RootState& root, std::exception_ptr error) noexcept;

struct PromiseBase {
  // Frames come from the frame arena (frame_arena.hpp): line-aligned, on huge pages.
  static void* operator new(std::size_t bytes) { return frame_arena::allocate(bytes); }
  static void operator delete(void* frame, std::size_t bytes) noexcept { frame_arena::release(frame, bytes); }

  std::coroutine_handle<> continuation = std::noop_coroutine();
  std::exception_ptr error;
  RootState* root = nullptr;

  std::suspend_always initial_suspend() noexcept { return {}; }

  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      auto& promise = h.promise();
      if (promise.root) root_finished(*promise.root, promise.error);
      return promise.continuation;
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error = std::current_exception(); }
};

template <typename T>
struct Promise : PromiseBase {
  std::optional<T> value;
  Task<T> get_return_object() noexcept;
  template <typename U>
  void return_value(U&& v) { value.emplace(std::forward<U>(v)); }
  T take() {
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }
};

template <>
struct Promise<void> : PromiseBase {
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() {
    if (error) std::rethrow_exception(error);
  }
};

}  // namespace detail

template <typename T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::Promise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) noexcept : handle_(h) {}
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { destroy(); }

  bool valid() const noexcept { return static_cast<bool>(handle_); }
  bool done() const noexcept { return handle_ && handle_.done(); }
  Handle handle() const noexcept { return handle_; }

  // The result (or the exception) of a finished task.
  T result() { return handle_.promise().take(); }

  // Awaiting a Task starts it and suspends the awaiter until it finishes.
  auto operator co_await() && noexcept {
    struct Awaiter {
      Handle h;
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
        h.promise().continuation = awaiting;
        return h;
      }
      T await_resume() { return h.promise().take(); }
    };
    return Awaiter{handle_};
  }

 private:
  void destroy() noexcept {
    if (handle_) handle_.destroy();
    handle_ = {};
  }
  Handle handle_;
};

namespace detail {
template <typename T>
Task<T> Promise<T>::get_return_object() noexcept {
  return Task<T>{std::coroutine_handle<Promise<T>>::from_promise(*this)};
}
inline Task<void> Promise<void>::get_return_object() noexcept {
  return Task<void>{std::coroutine_handle<Promise<void>>::from_promise(*this)};
}
}  // namespace detail

// Runs a task whose every await completes without suspending (the live backends block
// inside await_ready), and returns its result. A task that suspends anyway is a bug in
// the backend, reported rather than silently dropped.
template <typename T>
T run_blocking(Task<T> task) {
  task.handle().resume();
  if (!task.done())
    throw std::logic_error("run_blocking: task suspended, but nothing will resume it");
  return task.result();
}

}  // namespace dtsim::sim
