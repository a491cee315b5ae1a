// sim::TimeGrid: the simulated clock's resolution, so that sums of times are exact.
//
// Simulated time is a double in seconds. With a grid of tick 2^k s, every duration the
// simulation adds to a time is first rounded to a whole number of ticks (to the nearest,
// ties to even), and every time it schedules is then a whole number of ticks. Below the
// horizon, 2^53 ticks, every whole number of ticks is a double, so t + d is exact and
// so is t - u: the simulation is invariant under a shift of every time by any number
// of ticks, wherever in [0, horizon) it happens. That is what lets collective reuse
// (network_models/collective_reuse.hpp) replay a collective recorded at 1.3 s at 26.7 s
// bit for bit, and what makes the ranks of a step enter the next step with the same
// relative times, to the last bit, as in the step before.
//
// Without a grid (plain doubles, the spacing of doubles doubling at every power of
// two), only shifts inside one binade [2^e, 2^(e+1)) are exact, and then only by an
// even number of the binade's steps: shift_domain() is the binade there, as it is at
// and beyond the horizon of a grid, where durations are added as they are.
//
// Why a grid can change what reuse finds, not only where: ranks that share links under
// max-min fairness carry their relative lateness from step to step (a neutral mode: in
// exact arithmetic a step's pattern repeats), so a rounding bias along that mode drifts
// the pattern by a few units of rounding every step, and no step repeats exactly. The
// bias is a fixed function of the durations and the unit, so each unit is a draw: on
// SINGA's sync step on 4x4 to 32x32 tori (bench/results/engine-and-flow.md, "Time
// grid") ticks of 2^-40 and 2^-43 s drift on every torus tried, 2^-42, 2^-44 and 2^-47 s
// settle after two steps on every one, and plain doubles settle in some binades and
// drift in others. The drift is also an error (it accumulates), proportional to the
// unit: 2^-40 s moved an 8x8 torus's step mean by 0.17 us in 20 steps.
//
// The default a scenario gets (runner, `time_resolution_s`) is 2^-47 s, about 7.1 fs:
// the spacing of doubles between 32 and 64 s, so no coarser than plain doubles before
// its horizon, 2^6 = 64 s of simulated time; beyond it each binade is its own shift
// domain, as with plain doubles. An Engine without a grid is plain doubles.
#pragma once

#include <cmath>
#include <limits>

namespace dtsim::sim {

class TimeGrid {
 public:
  // No grid: plain doubles.
  TimeGrid() = default;
  // A tick of 2^exponent seconds (-1074 < exponent < 1023 - 53).
  static TimeGrid power_of_two(int exponent) {
    TimeGrid g;
    g.tick_ = std::ldexp(1.0, exponent);
    g.per_tick_ = std::ldexp(1.0, -exponent);
    g.horizon_ = std::ldexp(1.0, exponent + 53);
    g.exponent_ = exponent;
    return g;
  }
  // The largest power of two at most `seconds` (> 0); 0: no grid.
  static TimeGrid from_resolution(double seconds) {
    if (seconds == 0.0) return {};
    return power_of_two(std::ilogb(seconds));
  }

  bool on() const noexcept { return tick_ > 0.0; }
  double tick() const noexcept { return tick_; }      // 0 without a grid
  int exponent() const noexcept { return exponent_; }  // tick = 2^exponent
  // Times below it are whole numbers of ticks, and their sums and differences exact.
  double horizon() const noexcept { return horizon_; }

  // `d` (>= 0) rounded to the nearest whole number of ticks, ties to even; unchanged
  // without a grid.
  double quantize(double d) const noexcept {
    if (!on()) return d;
    double ticks = d * per_tick_;  // exact: a power of two
    // A number in [0, 2^52) plus 2^52 lies in [2^52, 2^53), where doubles are the
    // integers: the sum rounds it to one (to nearest, ties to even) and subtracting 2^52
    // is exact. From 2^52 on it is an integer already.
    if (ticks < 0x1p52) ticks = (ticks + 0x1p52) - 0x1p52;
    return ticks * tick_;
  }
  // The duration the simulation adds to `t` for `d`: quantized below the horizon.
  double duration_at(double t, double d) const noexcept { return t < horizon_ ? quantize(d) : d; }
  // t + d as the simulation computes it: exact below the horizon.
  double later(double t, double d) const noexcept { return t + duration_at(t, d); }
  // An absolute time given from outside (a bandwidth change at 0.3 s) put on the grid.
  double round(double t) const noexcept { return t < horizon_ ? quantize(t) : t; }

  // Whether `t` is a whole number of ticks, or needs not be (beyond the horizon, or
  // without a grid): every time the simulation computes is, one that came from elsewhere
  // unrounded may not be.
  bool on_grid(double t) const noexcept { return t >= horizon_ || quantize(t) == t; }

  // Times with one shift domain can be shifted exactly together: below the horizon of
  // a grid, all of [0, horizon) (kOnGrid); elsewhere the binade (std::ilogb).
  static constexpr int kOnGrid = std::numeric_limits<int>::min();
  int shift_domain(double t) const noexcept { return t < horizon_ ? kOnGrid : std::ilogb(t); }
  // Whether shift_domain(t) is meaningful: on the grid any time is, off it a positive
  // normal one (zero and subnormals have no binade of their own).
  bool shifts_exactly(double t) const noexcept { return t < horizon_ ? t >= 0.0 : std::isnormal(t) && t > 0.0; }

 private:
  double tick_ = 0.0;
  double per_tick_ = 0.0;
  double horizon_ = 0.0;  // 0 without a grid: every time is at or beyond it
  int exponent_ = 0;
};

}  // namespace dtsim::sim
