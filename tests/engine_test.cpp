// sim::Engine and sim::Task: event order, simulated time, coroutine composition, and
// how failures and deadlocks of rank programs are reported.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/engine.hpp"
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

TEST(Engine, RejectsEventsInThePast) {
  Engine engine;
  engine.call_at(1.0, [&] { EXPECT_THROW(engine.call_at(0.5, [] {}), std::logic_error); });
  engine.run();
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

Task<void> waits_forever(std::shared_ptr<Completion> never) { co_await *never; }

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
TEST(Engine, ReportsDeadlockedPrograms) {
  Engine engine;
  auto never = std::make_shared<Completion>(engine);
  engine.spawn(waits_forever(never), "rank 0");
  engine.spawn(waits_forever(never), "rank 3");
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
