#include "runner/report.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "network_models/nccl/nccl_model.hpp"
#include "runner/divergence.hpp"
#include "runner/percentile.hpp"

namespace dtsim::runner {

namespace {

std::string human_time(double s) {
  const double a = std::fabs(s);
  if (a >= 1.0) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (a >= 1e-6) return fmt::format("{:.3f} us", s * 1e6);
  return fmt::format("{:.1f} ns", s * 1e9);
}

// A figure of the training math, or "NaN" (a diverged run's, whatever its sign bit).
std::string figure(double x, const char* spec) {
  return std::isnan(x) ? std::string("NaN") : fmt::format(fmt::runtime(spec), x);
}

std::string percent(double fraction) {
  return std::isnan(fraction) ? std::string("NaN") : fmt::format("{:.2f}%", 100.0 * fraction);
}

// The run's first lines: what ran, where, and whose compute times these are.
std::string run_header(const RunResult& r) {
  const auto& s = r.scenario;
  std::string out;
  const std::string algo = s.algorithm.variant.empty() ? s.algorithm.name
                                                       : fmt::format("{} ({})", s.algorithm.name, s.algorithm.variant);
  std::string mode = r.mode == r.backend ? r.mode : fmt::format("{} over {}", r.mode, r.backend);
  if (r.timing_only) mode += ", timing-only";
  if (!r.replayed_from.empty()) mode += ", replayed";
  // A described machine (the nccl model) is its system, not a link.
  const std::string links = s.network.nccl ? fmt::format("on {} (NCCL {})", s.network.nccl->system.name,
                                                       net::nccl::to_string(s.network.nccl->system.nccl))
                                           : fmt::format("{:g} us / {:g} GB/s", s.network.nominal.latency_s * 1e6,
                                                         s.network.nominal.bandwidth_bytes_per_s / 1e9);
  out += fmt::format("{}: {}, {} ranks, {} topology, {} {}, {} steps, {}\n", s.name, algo, s.ranks, s.topology.kind,
                     s.network.model, links, s.steps, mode);
  // Emulated compute is the cost model's unless the scenario asks for measured times: say
  // so next to the table, which would otherwise read as this machine's speed.
  if (r.mode == "live")
    out += "compute: measured on this machine\n\n";
  else if (s.compute.kind == comm::ComputeTiming::Kind::Measured)
    out += "compute: measured on this machine (compute.timing \"measured\")\n\n";
  else if (!r.replayed_from.empty())
    out += "compute: the recorded seconds\n\n";
  else
    out += fmt::format("compute: cost model, {:g} GFLOP/s and {:g} GB/s of memory (not measured; compute.timing "
                       "\"measured\" times this machine)\n\n",
                       s.compute.model.flops_per_s / 1e9, s.compute.model.bytes_per_s / 1e9);
  return out;
}

// Each phase's mean time per step and share of the step, then the step.
std::string phase_table(const RunResult& r) {
  std::string out;
  const double step = r.mean_step_time_s();
  std::size_t w = 22;  // the phase column fits the longest phase name
  for (const auto& name : r.phase_names) w = std::max(w, name.size());
  out += fmt::format("| {:<{}} | {:>14} | {:>7} |\n", "phase", w, "time/step", "share");
  out += fmt::format("|{:-<{}}|{:->15}:|{:->8}:|\n", "", w + 2, "", "");
  double accounted = 0.0;
  for (std::size_t i = 0; i < r.phase_names.size(); ++i) {
    accounted += r.phase_mean_s[i];
    out += fmt::format("| {:<{}} | {:>14} | {:>6.1f}% |\n", r.phase_names[i], w, human_time(r.phase_mean_s[i]),
                       step > 0 ? 100.0 * r.phase_mean_s[i] / step : 0.0);
  }
  if (step - accounted > 1e-12 * step)
    out += fmt::format("| {:<{}} | {:>14} | {:>6.1f}% |\n", "(outside phases)", w, human_time(step - accounted),
                       100.0 * (step - accounted) / step);
  out += fmt::format("| {:<{}} | {:>14} | {:>6.1f}% |\n\n", "**step**", w, human_time(step), step > 0 ? 100.0 : 0.0);
  return out;
}

// Bits, bytes and calls per step; compute against exposed communication; the step times.
std::string step_figures(const RunResult& r) {
  std::string out;
  const double step = r.mean_step_time_s();
  out += fmt::format("bits/step/rank (n_bits): {:.0f}   wire bytes/step/rank: {:.0f}   collective calls/step: {:g}\n",
                     r.mean_n_bits(), r.mean_wire_bytes(), r.mean_calls());
  const double compute = r.mean_compute_time_s();
  const double exposed = std::max(0.0, step - compute);  // rounding can leave -0.0
  out += fmt::format("compute/step: {} ({:.1f}%)   exposed communication/step: {} ({:.1f}%)\n", human_time(compute),
                     step > 0 ? 100.0 * compute / step : 0.0, human_time(exposed),
                     step > 0 ? 100.0 * exposed / step : 0.0);
  out += fmt::format("simulated time: {} for {} steps   step p50: {}   p99: {}   max: {}\n", human_time(r.simulated_time_s()),
                     r.step_time_s.size(), human_time(nearest_rank_percentile(r.step_time_s, 50)),
                     human_time(nearest_rank_percentile(r.step_time_s, 99)),
                     human_time(nearest_rank_percentile(r.step_time_s, 100)));
  return out;
}

// What the run reached: its loss, accuracies and curve, or why it has none.
std::string outcome(const RunResult& r) {
  std::string out;
  if (!r.replayed_from.empty()) {
    out += fmt::format("replayed: every rank's recorded operations and compute ({}) on this network; no loss or "
                       "accuracy\n",
                       r.replayed_from);
    return out;
  }
  if (r.timing_only) {
    out += fmt::format("timing-only: rank {} ran the kernels, every rank replayed its operations; no loss or "
                       "accuracy\n",
                       r.representative_rank);
    if (r.algorithm_state_bytes > 0)
      out += fmt::format("algorithm state/rank: {:.0f} bytes\n", r.algorithm_state_bytes);
    return out;
  }
  if (!r.no_loss_reason.empty()) {
    out += fmt::format("no loss or accuracy: {}\n", r.no_loss_reason);
    if (r.algorithm_state_bytes > 0)
      out += fmt::format("algorithm state/rank: {:.0f} bytes\n", r.algorithm_state_bytes);
    return out;
  }
  if (r.diverged_at_step > 0)
    out += fmt::format("DIVERGED at step {} (training loss not finite or over {:g}x the first step's); the figures "
                       "below are after it\n",
                       r.diverged_at_step, kDivergenceFactor);
  out += fmt::format("final training loss (rank-averaged model): {}   training accuracy: {}",
                     figure(r.final_loss, "{:.6f}"), percent(r.final_accuracy));
  if (!std::isnan(r.final_test_accuracy))
    out += fmt::format("   test loss: {}   test accuracy: {}", figure(r.final_test_loss, "{:.6f}"),
                       percent(r.final_test_accuracy));
  out += fmt::format("   consensus distance: {}\n", figure(r.consensus_distance, "{:.3g}"));
  if (r.eval.size() > 1) {
    out += "\n| step | time | train loss | test accuracy |\n|---:|---:|---:|---:|\n";
    for (const auto& p : r.eval)
      out += fmt::format("| {} | {} | {:.6f} | {} |\n", p.step, human_time(p.time_s), p.train_loss,
                         std::isnan(p.test_accuracy) ? std::string("-") : fmt::format("{:.2f}%", 100.0 * p.test_accuracy));
    out += "\n";
  }
  if (r.algorithm_state_bytes > 0)
    out += fmt::format("algorithm state/rank: {:.0f} bytes\n", r.algorithm_state_bytes);
  return out;
}

}  // namespace

std::string format_table(const RunResult& r) { return run_header(r) + phase_table(r) + step_figures(r) + outcome(r); }

void write_json(const RunResult& result, const std::filesystem::path& file) {
  const auto tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << result.to_json().dump(2) << '\n';
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp));
  }
  std::filesystem::rename(tmp, file);
}

}  // namespace dtsim::runner
