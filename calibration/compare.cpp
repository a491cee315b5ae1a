#include "calibration/compare.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "comm/gloo.hpp"
#include "comm/nccl.hpp"
#include "runner/run.hpp"
#include "sim/task.hpp"

namespace dtsim::calibration {

using nlohmann::json;

namespace {

std::string time_text(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1.0) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

std::string size_text(double bytes) {
  if (bytes >= 1 << 20) return fmt::format("{:g} MB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return fmt::format("{:g} KB", bytes / (1 << 10));
  return fmt::format("{:g} B", bytes);
}

double relative(double predicted, double measured) { return measured > 0 ? (predicted - measured) / measured : 0.0; }

double median_abs(std::vector<double> v) {
  if (v.empty()) return 0.0;
  for (auto& x : v) x = std::abs(x);
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string row(const std::string& what, double measured, double predicted) {
  return fmt::format("| {:<24} | {:>12} | {:>12} | {:>+8.1f}% |\n", what, time_text(measured), time_text(predicted),
                     100.0 * relative(predicted, measured));
}

const char* kHeader =
    "| {:<24} |     measured |    predicted |    error |\n|--------------------------|-------------:|-------------:|---------:|\n";

}  // namespace

runner::Scenario with_model(runner::Scenario s, const NetworkModel& model) {
  s.network.model = model.model;
  s.network.nominal = {model.nominal.alpha_s, model.nominal.beta_bytes_per_s};
  s.compute.kind = comm::ComputeTiming::Kind::Measured;
  return s;
}

std::string samples_table(const std::vector<Sample>& samples, const NetworkModel& model) {
  std::string out = fmt::format(fmt::runtime(kHeader), "operation, bytes");
  std::vector<double> large;
  for (const auto& s : samples) {
    auto link = model.links.find(s.link);
    const double p = predict(s, link != model.links.end() ? link->second : model.nominal);
    const std::string what = s.probe == Probe::PointToPoint ? fmt::format("p2p {} {}", s.link, size_text(s.bytes))
                                                            : fmt::format("{} {}", to_string(s.probe), size_text(s.bytes));
    out += row(what, s.seconds, p);
    if (s.bytes >= (1 << 20)) large.push_back(relative(p, s.seconds));
  }
  out += fmt::format("median |error| for sizes >= 1 MB: {:.1f}% ({} samples)\n", 100.0 * median_abs(large), large.size());
  return out;
}

Comparison compare(const runner::Scenario& scenario, const comm::LiveEnv& env, const CompareOptions& o) {
  if (env.master_port == 65535) throw std::invalid_argument("compare: MASTER_PORT + 1 (the sweep's rendezvous) must be a port");
  const auto s = with_model(scenario, o.model);
  runner::RunOptions run_options;
  run_options.live_backend = o.backend;
  const auto live = runner::run_live(s, env, run_options);

  std::vector<Sample> sweep;
  {
    comm::LiveEnv sweep_env = env;
    sweep_env.master_port = static_cast<std::uint16_t>(env.master_port + 1);
    auto comm = o.backend == "nccl" ? comm::make_nccl_communicator(sweep_env) : comm::make_gloo_communicator(sweep_env);
    MeasureOptions m;
    m.probes = {Probe::AllReduce};
    m.sizes = o.sweep_sizes;
    m.warmup = o.warmup;
    m.iters = o.iters;
    if (o.backend == "nccl") m.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
    sweep = sim::run_blocking(measure(*comm, m));
  }

  Comparison c;
  if (env.rank != 0) return c;
  const auto emu = runner::run_emulated(s);

  json phases = json::array();
  c.table = fmt::format("{}: live ({}) versus emulated with the calibrated model (alpha {}, beta {:.3f} GB/s)\n\n",
                        s.name, live.backend, time_text(o.model.nominal.alpha_s), o.model.nominal.beta_bytes_per_s / 1e9);
  c.table += fmt::format(fmt::runtime(kHeader), "phase (mean per step)");
  for (std::size_t i = 0; i < live.phase_names.size(); ++i) {
    const auto& name = live.phase_names[i];
    const auto it = std::find(emu.phase_names.begin(), emu.phase_names.end(), name);
    const double predicted = it == emu.phase_names.end() ? 0.0 : emu.phase_mean_s[it - emu.phase_names.begin()];
    c.table += row(name, live.phase_mean_s[i], predicted);
    phases.push_back({{"name", name},
                      {"measured_s", live.phase_mean_s[i]},
                      {"predicted_s", predicted},
                      {"relative_error", relative(predicted, live.phase_mean_s[i])}});
  }
  c.table += row("step", live.mean_step_time_s(), emu.mean_step_time_s());

  json steps = json::array();
  std::vector<double> step_errors;
  std::string step_rows = fmt::format(fmt::runtime(kHeader), "step");
  for (std::size_t t = 0; t < live.step_time_s.size() && t < emu.step_time_s.size(); ++t) {
    const double m = live.step_time_s[t], p = emu.step_time_s[t];
    step_errors.push_back(relative(p, m));
    steps.push_back({{"step", t + 1}, {"measured_s", m}, {"predicted_s", p}, {"relative_error", relative(p, m)}});
    if (t < 10) step_rows += row(std::to_string(t + 1), m, p);
  }
  c.table += fmt::format("\n{}(first 10 steps) median |error| over {} steps: {:.1f}%\n\n", step_rows, step_errors.size(),
                         100.0 * median_abs(step_errors));
  c.table += samples_table(sweep, o.model);

  json sizes = json::array();
  for (const auto& x : sweep) {
    const double p = predict(x, o.model.nominal);
    sizes.push_back({{"bytes", x.bytes}, {"measured_s", x.seconds}, {"predicted_s", p}, {"relative_error", relative(p, x.seconds)}});
  }
  c.json = {{"scenario", s.to_json()},
            {"backend", live.backend},
            {"model", {{"latency_us", o.model.nominal.alpha_s * 1e6}, {"bandwidth_GBps", o.model.nominal.beta_bytes_per_s / 1e9}}},
            {"phases", phases},
            {"step", {{"measured_s", live.mean_step_time_s()}, {"predicted_s", emu.mean_step_time_s()},
                      {"median_abs_relative_error", median_abs(step_errors)}}},
            {"steps", steps},
            {"all_reduce_sweep", sizes}};
  return c;
}

}  // namespace dtsim::calibration
