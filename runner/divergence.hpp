// When a run diverged: one stated rule, applied to every run that computes a loss.
//
// A run diverged at the first step whose rank-mean training loss is not finite, or is
// more than kDivergenceFactor times the loss of its first step (a model that learns
// brings its loss down; noise around a falling loss stays far below ten times where it
// began). A run whose steps never did, but whose final rank-averaged model has a loss
// that is not finite or beyond the same bound, or whose consensus distance is not
// finite, diverged at its last step. The run still goes to the end: the figures after
// the step are reported, marked.
#pragma once

#include <cstdint>
#include <span>

namespace dtsim::runner {

inline constexpr double kDivergenceFactor = 10.0;

// The 1-based step at which the run diverged by the rule above, or 0 when it did not.
// `loss` holds the rank-mean training loss per step.
std::int64_t diverged_at_step(std::span<const double> loss, double final_loss, double consensus_distance);

}  // namespace dtsim::runner
