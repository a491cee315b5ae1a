#include "runner/progress.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

namespace dtsim::runner {

namespace {

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.0f} s", s);
  if (s < 3600) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

}  // namespace

ProgressLine::ProgressLine(std::FILE* out, double delay_s, double interval_s)
    : out_(out), delay_s_(delay_s), interval_s_(interval_s), start_(Clock::now()), stage_start_(start_),
      last_draw_(start_) {}

double ProgressLine::default_delay_s() {
  if (const char* env = std::getenv("DTSIM_PROGRESS_AFTER_S")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end != env && *end == '\0' && v >= 0) return v;
  }
  return 2.5;
}

std::string ProgressLine::text(const RunProgress& p, double elapsed_s) {
  const double fraction = p.steps > 0 ? static_cast<double>(p.step) / static_cast<double>(p.steps) : 0.0;
  std::string line = p.stage.empty() ? "" : p.stage + ": ";
  const double t = p.simulated_s;
  const std::string simulated = t >= 1 || t == 0 ? fmt::format("{:.3g} s", t)
                                : t >= 1e-3     ? fmt::format("{:.3g} ms", t * 1e3)
                                                : fmt::format("{:.3g} us", t * 1e6);
  line += fmt::format("step {}/{} ({:.0f}%), simulated {}, {} elapsed", p.step, p.steps, 100 * fraction, simulated,
                      duration(elapsed_s));
  if (fraction > 0 && p.step < p.steps) line += ", ETA " + duration(elapsed_s / fraction * (1 - fraction));
  return line;
}

void ProgressLine::update(const RunProgress& p) {
  const auto now = Clock::now();
  if (p.stage != stage_) {  // timing-only mode: the kernels, then the replay
    stage_ = p.stage;
    stage_start_ = now;
  }
  const double since_start = std::chrono::duration<double>(now - start_).count();
  if (since_start < delay_s_) return;
  if (drawn_ && std::chrono::duration<double>(now - last_draw_).count() < interval_s_) return;
  const std::string line = text(p, std::chrono::duration<double>(now - stage_start_).count());
  // Pad over a longer previous line.
  fmt::print(out_, "\r{:<{}}", line, std::max(width_, line.size()));
  std::fflush(out_);
  width_ = std::max(width_, line.size());
  drawn_ = true;
  last_draw_ = now;
}

void ProgressLine::clear() {
  if (!drawn_) return;
  fmt::print(out_, "\r{:<{}}\r", "", width_);
  std::fflush(out_);
  drawn_ = false;
  width_ = 0;
}

}  // namespace dtsim::runner
