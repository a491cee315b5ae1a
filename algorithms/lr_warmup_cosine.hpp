// The language-model default schedule, "warmup_cosine" (algorithm.lr_schedule, lr_schedule.hpp):
// a linear warm-up over W steps, then a cosine decay to lr_min at step T, counted in steps
// (no epochs, so it runs on every workload, the shape-only models included). Step t from 1:
//
//   t <= W:        lr_t = lr_0 + (L - lr_0) t / W              (reaches the peak L at t = W)
//   W < t <= T:    lr_t = lr_min + (L - lr_min) (1 + cos(pi (t - W) / (T - W))) / 2
//   t > T:         lr_t = lr_min
//
// lr_0 = warmup_init_lr (default 0), L the peak (lr, times a scale-up), T = total_steps or the
// run's steps (T > W). W = 0: no warm-up, the decay runs from step 1 (at t / T).
// As nanoGPT's get_lr and the DiLoCo papers' inner schedule, counted from step 1.
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dtsim::algorithms {

inline double warmup_cosine_lr(double t, double peak, double lr_0, double lr_min, double warmup_steps,
                               double total_steps) {
  if (t <= warmup_steps) return lr_0 + (peak - lr_0) * (t / warmup_steps);
  const double p = std::min((t - warmup_steps) / (total_steps - warmup_steps), 1.0);
  return lr_min + (peak - lr_min) * (1.0 + std::cos(std::numbers::pi * p)) / 2.0;
}

}  // namespace dtsim::algorithms
