// sim::TimeGrid (sim/time_grid.hpp): durations rounded to whole ticks, so that below the
// horizon every sum of times is exact and the simulation shifts exactly by any number of
// ticks; and the Engine's after() and sleep_for on it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sim/engine.hpp"
#include "sim/time_grid.hpp"

namespace dtsim::sim {
namespace {

TEST(TimeGrid, ResolutionIsThePowerOfTwoAtOrBelowIt) {
  const auto ps = TimeGrid::from_resolution(1e-12);
  EXPECT_TRUE(ps.on());
  EXPECT_EQ(ps.tick(), 0x1p-40);  // 0.909... ps: 1e-12 lies in [2^-40, 2^-39)
  EXPECT_EQ(ps.exponent(), -40);
  EXPECT_EQ(ps.horizon(), 8192.0);  // 2^53 ticks
  EXPECT_EQ(TimeGrid::from_resolution(0x1p-40).tick(), 0x1p-40);
  EXPECT_EQ(TimeGrid::from_resolution(1e-9).tick(), 0x1p-30);
  const TimeGrid off = TimeGrid::from_resolution(0.0);
  EXPECT_FALSE(off.on());
  EXPECT_EQ(off.tick(), 0.0);
  EXPECT_EQ(off.quantize(0.1), 0.1);
  EXPECT_EQ(off.later(1.0, 0.1), 1.0 + 0.1);
}

TEST(TimeGrid, QuantizeRoundsToTheNearestTickTiesToEven) {
  const auto g = TimeGrid::power_of_two(-10);
  const double tick = 0x1p-10;
  EXPECT_EQ(g.quantize(0.0), 0.0);
  EXPECT_EQ(g.quantize(2.4 * tick), 2 * tick);
  EXPECT_EQ(g.quantize(2.6 * tick), 3 * tick);
  EXPECT_EQ(g.quantize(2.5 * tick), 2 * tick);  // a tie: to the even count
  EXPECT_EQ(g.quantize(3.5 * tick), 4 * tick);
  EXPECT_EQ(g.quantize(0.4 * tick), 0.0);
  // Just below 2^52 ticks, where doubles are half ticks apart.
  EXPECT_EQ(g.quantize((0x1p51 + 2.5) * tick), (0x1p51 + 2) * tick);
  EXPECT_EQ(g.quantize((0x1p51 + 3.5) * tick), (0x1p51 + 4) * tick);
  EXPECT_EQ(g.quantize((0x1p52 - 0.5) * tick), 0x1p52 * tick);
  EXPECT_EQ(g.quantize((0x1p51 + 3) * tick), (0x1p51 + 3) * tick);  // whole: unchanged
  EXPECT_EQ(g.quantize(0x1p52 * tick + 2 * tick), 0x1p52 * tick + 2 * tick);  // whole already
  EXPECT_EQ(g.quantize(1e300), 1e300);
}

TEST(TimeGrid, OnGridAndShiftDomains) {
  const auto g = TimeGrid::power_of_two(-40);
  EXPECT_TRUE(g.on_grid(0.0));
  EXPECT_TRUE(g.on_grid(1.5));
  EXPECT_TRUE(g.on_grid(g.later(1.5, 0.1)));
  EXPECT_FALSE(g.on_grid(0.1));  // 0.1's double has bits below 2^-40
  EXPECT_TRUE(g.on_grid(0.1 + 9000.0));  // beyond the horizon there is nothing to be on
  EXPECT_EQ(g.shift_domain(0.0), TimeGrid::kOnGrid);
  EXPECT_EQ(g.shift_domain(1e-9), TimeGrid::kOnGrid);
  EXPECT_EQ(g.shift_domain(8000.0), TimeGrid::kOnGrid);
  EXPECT_EQ(g.shift_domain(8192.0), 13);
  EXPECT_EQ(g.shift_domain(20000.0), 14);
  EXPECT_TRUE(g.shifts_exactly(0.0));
  const TimeGrid off;
  EXPECT_EQ(off.shift_domain(1.5), 0);
  EXPECT_EQ(off.shift_domain(3.0), 1);
  EXPECT_FALSE(off.shifts_exactly(0.0));
  EXPECT_TRUE(off.shifts_exactly(1e-300));
  EXPECT_TRUE(off.on_grid(0.1));
  // Beyond the horizon durations add as they are.
  EXPECT_EQ(g.later(9000.0, 0.1), 9000.0 + 0.1);
  EXPECT_EQ(g.round(9000.1), 9000.1);
}

// A chain of times t_(k+1) = t_k + d_k with durations from nanoseconds to a tenth of a
// second, started at `origin`.
std::vector<double> chain_from(const TimeGrid& g, double origin, const std::vector<double>& durations) {
  std::vector<double> t{origin};
  for (double d : durations) t.push_back(g.later(t.back(), d));
  return t;
}

std::vector<double> mixed_durations(int n) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-9.0, -1.0);
  std::vector<double> d;
  for (int i = 0; i < n; ++i) d.push_back(std::pow(10.0, exponent(rng)));
  return d;
}

// The property reuse rests on: the same chain started any whole number of ticks later
// is the first one shifted, to the last bit, across powers of two; with plain doubles
// it is not (the spacing of doubles changes at every power of two).
TEST(TimeGrid, ChainsShiftExactlyAcrossPowersOfTwo) {
  const auto g = TimeGrid::power_of_two(-40);
  const auto durations = mixed_durations(2000);
  const auto base = chain_from(g, 0.75, durations);
  ASSERT_GT(base.back(), 2.0);  // the chain itself crosses 1 and 2 s
  for (double shift : {0x1p-40, 3.0, 0.5 + 0x1p-40 * 12345, 1000.0, 4000.0}) {
    const auto shifted = chain_from(g, 0.75 + shift, durations);
    for (std::size_t k = 0; k < base.size(); ++k) {
      ASSERT_EQ(shifted[k] - shift, base[k]) << "shift " << shift << ", time " << k;
      ASSERT_TRUE(g.on_grid(shifted[k])) << "shift " << shift << ", time " << k << " = " << shifted[k];
    }
  }
  const TimeGrid off;
  const auto plain = chain_from(off, 0.75, durations);
  const auto plain_shifted = chain_from(off, 0.75 + 1000.0, durations);
  int differ = 0;
  for (std::size_t k = 0; k < plain.size(); ++k) differ += (plain_shifted[k] - plain[k]) != 1000.0;
  EXPECT_GT(differ, 0) << "plain doubles shifted across binades round differently";
}

// Rounding every duration costs at most half a tick each: the chain stays within
// n / 2 ticks of the plain-double one.
TEST(TimeGrid, RoundingErrorIsAtMostHalfATickPerDuration) {
  const auto g = TimeGrid::power_of_two(-40);
  const auto durations = mixed_durations(2000);
  const auto on = chain_from(g, 0.75, durations);
  double exact = 0.75;
  for (double d : durations) exact += d;
  EXPECT_LE(std::abs(on.back() - exact), 2000 * 0.5 * 0x1p-40 + 1e-11);  // + the plain sum's own rounding
  EXPECT_NE(on.back(), exact);
}

Task<void> sleeper(Engine& engine, double dt, int times, double& woke) {
  for (int i = 0; i < times; ++i) co_await engine.sleep_for(dt);
  woke = engine.now();
}

TEST(TimeGrid, EngineSleepsInWholeTicks) {
  Engine engine(TimeGrid::power_of_two(-40));
  double woke = -1.0;
  engine.spawn(sleeper(engine, 0.1, 10, woke), "sleeper");
  engine.run();
  EXPECT_EQ(woke, 10 * engine.time_grid().quantize(0.1));  // exact: ten whole-tick sums
  EXPECT_EQ(engine.time_grid().quantize(0.1), std::nearbyint(0.1 * 0x1p40) * 0x1p-40);
  EXPECT_EQ(engine.after(0.25), engine.now() + 0.25);

  Engine plain;
  double plain_woke = -1.0;
  plain.spawn(sleeper(plain, 0.1, 10, plain_woke), "sleeper");
  plain.run();
  double sum = 0.0;
  for (int i = 0; i < 10; ++i) sum += 0.1;
  EXPECT_EQ(plain_woke, sum);
}

}  // namespace
}  // namespace dtsim::sim
