// lr_schedule "wsd": warm-up, stable, decay (Hagele et al., "Scaling Laws and
// Compute-Optimal Training Beyond Fixed Training Durations", NeurIPS 2024; MiniCPM's
// schedule): a linear warm-up over W steps, the peak lr until the decay starts at
// T0 = T - D (D = decay_fraction T), then down to lr_min at T. Step t from 1:
//
//   t <= W:        lr_t = lr_0 + (L - lr_0) t / W
//   W < t <= T0:   lr_t = L
//   t > T0:        lr_t = lr_min + (L - lr_min) g(p),  p = min((t - T0) / D, 1)
//
// with g(p) = 1 - p (linear), (1 + cos(pi p)) / 2 (cosine) or 1 - sqrt(p) (1-sqrt, the
// paper's best cooldown, the default). lr_0 = warmup_init_lr (default 0), L the peak (lr,
// times a scale-up), T = total_steps or the run's steps; T0 >= W. Counted in steps, so it
// runs on every workload; warmup_epochs must stay 0.
#include "algorithms/lr_schedules/wsd.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

namespace {

const WsdSettings& settings(const LrScheduleSpec& s) { return lr_schedule_settings<WsdSettings>(s); }

// The decay's shapes g(p), p in [0, 1]: from 1 at the decay's start to 0 at its end.
struct DecayShape {
  std::string_view name;
  double (*g)(double p);
};
constexpr DecayShape kDecayShapes[] = {
    {"linear", [](double p) { return 1.0 - p; }},
    {"cosine", [](double p) { return (1.0 + std::cos(std::numbers::pi * p)) / 2.0; }},
    {"1-sqrt", [](double p) { return 1.0 - std::sqrt(p); }},
};

std::vector<std::string> decay_shape_names() {
  std::vector<std::string> names;
  for (const auto& d : kDecayShapes) names.emplace_back(d.name);
  return names;
}

// The step the decay starts at, T0 = T - decay_fraction T.
double decay_start(const WsdSettings& s, double T) { return T - s.decay_fraction * T; }

void parse(config::ObjectReader& o, LrScheduleSpec& spec) {
  WsdSettings s;
  s.span = parse_step_span(o, spec);
  s.decay_fraction = o.number("decay_fraction", s.decay_fraction, 0.0, 1.0, true);
  const auto W = static_cast<double>(s.span.warmup_steps), T = static_cast<double>(s.span.total_steps);
  if (s.span.total_steps != 0 && decay_start(s, T) < W)
    throw config::ScenarioError(o.where("decay_fraction"), config::ErrorKind::inconsistent,
                                fmt::format("the decay would start at step {} of {}, inside the {}-step warm-up: expected "
                                            "decay_fraction <= {}",
                                            decay_start(s, T), s.span.total_steps, s.span.warmup_steps, 1.0 - W / T));
  s.decay_shape = o.choice("decay_shape", s.decay_shape, decay_shape_names());
  s.lr_min = o.number("lr_min", s.lr_min, 0.0, config::kInf);
  spec.settings = s;
}

void to_json(const LrScheduleSpec& spec, nlohmann::json& out) {
  const WsdSettings& s = settings(spec);
  step_span_json(s.span, out);
  out["decay_fraction"] = s.decay_fraction;
  out["decay_shape"] = s.decay_shape;
  out["lr_min"] = s.lr_min;
}

LrShape make(const LrScheduleSpec& spec, const LrShapeContext& c) {
  const WsdSettings& s = settings(spec);
  const double W = static_cast<double>(s.span.warmup_steps);
  const double T = step_span_end(s.span, c.run_steps, "wsd");
  const double T0 = decay_start(s, T), D = T - T0;
  if (T0 < W)
    throw std::invalid_argument(
        fmt::format("wsd over {} steps: its decay would start at step {}, inside the {}-step warm-up", T, T0, s.span.warmup_steps));
  const auto shape = std::find_if(std::begin(kDecayShapes), std::end(kDecayShapes),
                                  [&](const DecayShape& d) { return d.name == s.decay_shape; });
  if (shape == std::end(kDecayShapes))
    throw std::invalid_argument(fmt::format("wsd: unknown decay_shape '{}' (expected {})", s.decay_shape,
                                            fmt::join(decay_shape_names(), ", ")));
  const auto g = shape->g;
  return [peak = c.peak, lr_0 = spec.warmup_init_lr, lr_min = s.lr_min, W, T0, D, g](double t) {
    if (t <= W) return step_warmup_lr(t, peak, lr_0, W);
    if (t <= T0) return peak;
    return lr_min + (peak - lr_min) * g(std::min((t - T0) / D, 1.0));
  };
}

}  // namespace

const LrScheduleEntry& wsd_schedule() {
  static const LrScheduleEntry entry{
      .name = "wsd",
      .description = "warm-up, stable, decay, in steps: linear warm-up over warmup_steps, L, then the last decay_fraction of "
                     "total_steps (or the run's steps) down to lr_min, linear, cosine or 1-sqrt (Hagele et al. 2024)",
      .fields = {"warmup_steps", "total_steps", "decay_fraction", "decay_shape", "lr_min"},
      .example = nlohmann::json::object(),
      .parse = parse,
      .to_json = to_json,
      .counts_epochs = [](const LrScheduleSpec&) { return false; },
      .make = make};
  return entry;
}

}  // namespace dtsim::algorithms
