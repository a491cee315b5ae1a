#include "calibration/compare.hpp"
#include "config/scenario_error.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "comm/live_backend.hpp"
#include "comm/op_trace.hpp"
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

// The scenario's rows, `w` characters for the first column: the emulated prediction and
// the replay of the live traces.
std::string scenario_row(std::size_t w, const std::string& what, double measured, double predicted, double replayed) {
  return fmt::format("| {:<{}} | {:>12} | {:>12} | {:>+8.1f}% | {:>12} | {:>+8.1f}% |\n", what, w, time_text(measured),
                     time_text(predicted), 100.0 * relative(predicted, measured), time_text(replayed),
                     100.0 * relative(replayed, measured));
}

std::string scenario_header(std::size_t w, const std::string& what) {
  return fmt::format("| {:<{}} |     measured |    predicted |    error |     replayed |    error |\n"
                     "|{:-<{}}|-------------:|-------------:|---------:|-------------:|---------:|\n",
                     what, w, "", w + 2);
}

// Every rank's trace on rank 0, in rank order (the others get an empty list).
std::vector<comm::OpTrace> gather_traces(comm::Communicator& comm, const comm::OpTrace& mine,
                                         const at::TensorOptions& on) {
  const auto bytes = comm::to_bytes(mine);
  at::Tensor block = at::from_blob(const_cast<std::uint8_t*>(bytes.data()), {static_cast<std::int64_t>(bytes.size())},
                                   at::kByte)
                         .to(on.device(), /*non_blocking=*/false, /*copy=*/true);
  std::vector<at::Tensor> blocks;
  sim::run_blocking([](comm::Communicator& c, const at::Tensor& in, std::vector<at::Tensor>& out) -> sim::Task<void> {
    co_await c.all_gather(in, out);
  }(comm, block, blocks));
  std::vector<comm::OpTrace> traces;
  if (comm.rank() != 0) return traces;
  for (const auto& b : blocks) {
    const at::Tensor host = b.to(at::kCPU).contiguous();
    const auto* p = host.data_ptr<std::uint8_t>();
    traces.push_back(comm::op_trace_from_bytes(std::vector<std::uint8_t>(p, p + host.numel())));
  }
  return traces;
}

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
  if (env.master_port == 65535) throw config::InputError("compare: MASTER_PORT + 1 (the sweep's rendezvous) must be a port");
  const auto s = with_model(scenario, o.model);
  runner::RunOptions run_options;
  run_options.live_backend = o.backend;
  std::vector<comm::OpTrace> recorded;
  run_options.record_traces = &recorded;
  const auto live = runner::run_live(s, env, run_options);

  std::vector<Sample> sweep;
  std::vector<comm::OpTrace> traces;
  {
    comm::LiveEnv sweep_env = env;
    sweep_env.master_port = static_cast<std::uint16_t>(env.master_port + 1);
    const auto& backend = comm::live_backend(o.backend);
    auto comm = backend.make(sweep_env, {});
    MeasureOptions m;
    m.probes = {Probe::AllReduce};
    m.sizes = o.sweep_sizes;
    m.warmup = o.warmup;
    m.iters = o.iters;
    m.device = backend.device(env);
    traces = gather_traces(*comm, recorded.at(0), at::TensorOptions().device(m.device));
    sweep = sim::run_blocking(measure(*comm, m));
  }

  Comparison c;
  if (env.rank != 0) return c;
  const auto emu = runner::run_emulated(s);
  const auto replayed = runner::replay_traces(s, traces);
  auto phase_of = [](const runner::RunResult& r, const std::string& name) {
    const auto it = std::find(r.phase_names.begin(), r.phase_names.end(), name);
    return it == r.phase_names.end() ? 0.0 : r.phase_mean_s[static_cast<std::size_t>(it - r.phase_names.begin())];
  };

  json phases = json::array();
  c.table = fmt::format(
      "{}: live ({}) versus emulated with the calibrated model (alpha {}, beta {:.3f} GB/s).\n"
      "predicted: emulated, compute timed on this rank alone; replayed: every live rank's recorded operations and\n"
      "compute (plus {} per step of host work outside compute) replayed on the model, so its error is the network's.\n\n",
      s.name, live.backend, time_text(o.model.nominal.alpha_s), o.model.nominal.beta_bytes_per_s / 1e9,
      time_text(replayed.mean_compute_time_s() - live.mean_compute_time_s()));
  std::size_t w = 24;  // the first column fits the longest phase name
  for (const auto& name : live.phase_names) w = std::max(w, name.size());
  c.table += scenario_header(w, "phase (mean per step)");
  for (std::size_t i = 0; i < live.phase_names.size(); ++i) {
    const auto& name = live.phase_names[i];
    const double measured = live.phase_mean_s[i], predicted = phase_of(emu, name), replay = phase_of(replayed, name);
    c.table += scenario_row(w, name, measured, predicted, replay);
    phases.push_back({{"name", name},
                      {"measured_s", measured},
                      {"predicted_s", predicted},
                      {"relative_error", relative(predicted, measured)},
                      {"replayed_s", replay},
                      {"replay_relative_error", relative(replay, measured)}});
  }
  c.table += scenario_row(w, "step", live.mean_step_time_s(), emu.mean_step_time_s(), replayed.mean_step_time_s());

  json steps = json::array();
  std::vector<double> step_errors, replay_errors;
  std::string step_rows = scenario_header(w, "step");
  for (std::size_t t = 0; t < live.step_time_s.size() && t < emu.step_time_s.size(); ++t) {
    const double m = live.step_time_s[t], p = emu.step_time_s[t], r = replayed.step_time_s.at(t);
    step_errors.push_back(relative(p, m));
    replay_errors.push_back(relative(r, m));
    steps.push_back({{"step", t + 1},
                     {"measured_s", m},
                     {"measured_compute_s", live.compute_time_s[t]},
                     {"predicted_s", p},
                     {"relative_error", relative(p, m)},
                     {"replayed_s", r},
                     {"replayed_compute_s", replayed.compute_time_s.at(t)},
                     {"replay_relative_error", relative(r, m)}});
    if (t < 10) step_rows += scenario_row(w, std::to_string(t + 1), m, p, r);
  }
  c.table += fmt::format("\n{}(first 10 steps) median |error| over {} steps: predicted {:.1f}%, replayed {:.1f}%\n\n",
                         step_rows, step_errors.size(), 100.0 * median_abs(step_errors),
                         100.0 * median_abs(replay_errors));
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
            {"step", {{"measured_s", live.mean_step_time_s()},
                      {"predicted_s", emu.mean_step_time_s()},
                      {"median_abs_relative_error", median_abs(step_errors)},
                      {"replayed_s", replayed.mean_step_time_s()},
                      {"replay_median_abs_relative_error", median_abs(replay_errors)},
                      {"host_outside_compute_s", replayed.mean_compute_time_s() - live.mean_compute_time_s()}}},
            {"steps", steps},
            {"all_reduce_sweep", sizes}};
  return c;
}

}  // namespace dtsim::calibration
