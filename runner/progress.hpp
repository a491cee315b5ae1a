// runner::ProgressLine: one line on a terminal for a long run, redrawn in place.
//
// `dtsim run` (and `live` rank 0, `replay`) feed it RunOptions::progress when stderr is a
// terminal and --quiet is not given: "step 120/2000 (6%), simulated 1.23 s, 45 s elapsed,
// ETA 11 min", redrawn with '\r' at most four times a second, only once the run has
// lasted `delay_s` (2.5 s; DTSIM_PROGRESS_AFTER_S overrides it, for tests), and erased
// when the run ends. It only reads the steps it is told: results are the same with it.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "runner/run.hpp"

namespace dtsim::runner {

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out, double delay_s = default_delay_s(), double interval_s = 0.25);
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void update(const RunProgress& p);
  // Erases the line, if one is drawn.
  void clear();
  // 2.5, or DTSIM_PROGRESS_AFTER_S when it is a number >= 0.
  static double default_delay_s();
  // The text for `p` after `elapsed_s` of its stage.
  static std::string text(const RunProgress& p, double elapsed_s);

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* out_;
  double delay_s_, interval_s_;
  Clock::time_point start_, stage_start_, last_draw_;
  std::string stage_;
  bool drawn_ = false;
  std::size_t width_ = 0;
};

}  // namespace dtsim::runner
