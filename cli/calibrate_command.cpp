#include "cli/calibrate_command.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "calibration/calibration.hpp"
#include "cli/exit_codes.hpp"
#include "calibration/compare.hpp"
#include "comm/live_backend.hpp"
#include "runner/collective_table.hpp"
#include "runner/scenario.hpp"
#include "sim/task.hpp"

namespace dtsim::cli {

namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& file, const std::string& text) {
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  std::ofstream out(file);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace

CalibrateCommands::CalibrateCommands(CLI::App& app) {
  const std::string backend_help = comm::live_backends_help();
  calibrate_ = app.add_subcommand(
      "calibrate", "As one rank of a live job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...): time ring all-reduces, "
                   "all-gathers and point-to-point messages over a range of sizes, fit the network model's alpha and "
                   "beta by least squares, and (rank 0) write the network model file and print measured versus fitted");
  calibrate_->add_option("--out", out_, "Network model file to write")->capture_default_str();
  calibrate_->add_option("--backend", backend_, backend_help)->check(CLI::IsMember(comm::live_backend_names()))->capture_default_str();
  calibrate_->add_option("-b,--minbytes", min_, "Smallest message (bytes; K, M, G suffixes)")->capture_default_str();
  calibrate_->add_option("-e,--maxbytes", max_, "Largest message")->capture_default_str();
  calibrate_->add_option("-f,--stepfactor", factor_, "Multiply the size by this between probes")->capture_default_str();
  calibrate_->add_option("-w,--warmup", warmup_, "Untimed iterations per size")->check(CLI::NonNegativeNumber)->capture_default_str();
  calibrate_->add_option("-n,--iters", iters_, "Timed iterations per size (the median is kept)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  calibrate_->add_flag("--quiet", quiet_, "Do not print the table");

  compare_ = app.add_subcommand(
      "compare", "As one rank of a live job: run SCENARIO live, recording every rank's operations, then (rank 0) "
                 "predict it on the calibrated network model twice: emulated with measured compute, and by replaying "
                 "the live ranks' traces (live compute, modelled communication); print per phase and per step "
                 "measured versus predicted and replayed time with the relative errors, then a ring all-reduce sweep "
                 "measured versus predicted per size (traces and sweep rendezvous at MASTER_PORT + 1); writes "
                 "<scenario>.compare.json");
  compare_->add_option("scenario", scenario_, "Scenario JSON file")->required();
  compare_->add_option("--model", model_, "Network model file from `dtsim calibrate`")->required();
  compare_->add_option("--out", out_dir_, "Directory for the JSON (default: next to the scenario)");
  compare_->add_option("--backend", backend_, backend_help)->check(CLI::IsMember(comm::live_backend_names()))->capture_default_str();
  compare_->add_option("--sweep-min", sweep_min_, "Smallest all-reduce of the sweep")->capture_default_str();
  compare_->add_option("--sweep-max", sweep_max_, "Largest all-reduce of the sweep")->capture_default_str();
  compare_->add_option("-n,--iters", iters_, "Timed iterations per sweep size")->check(CLI::PositiveNumber)->capture_default_str();
  compare_->add_flag("--quiet", quiet_, "Do not print the tables");
}

std::optional<int> CalibrateCommands::run() const {
  if (calibrate_->parsed()) return exit_code_of([&] { return run_calibrate(); });
  if (compare_->parsed()) return exit_code_of([&] { return run_compare(); });
  return std::nullopt;
}

int CalibrateCommands::run_calibrate() const {
  calibration::MeasureOptions m;
  m.sizes = calibration::geometric_sizes(runner::parse_size(min_), runner::parse_size(max_), factor_);
  m.warmup = warmup_;
  m.iters = iters_;
  const auto env = comm::LiveEnv::from_environment();
  const auto& backend = comm::live_backend(backend_);
  m.device = backend.device(env);
  std::vector<calibration::Sample> samples;
  {
    auto comm = backend.make(env, {});
    samples = sim::run_blocking(calibration::measure(*comm, m));
  }
  if (env.rank != 0) return 0;
  const auto model = calibration::fit_model(samples);
  const auto doc = calibration::model_json(model, samples, backend_);
  write_text(out_, doc.dump(1) + "\n");
  if (doc["calibration"].contains("warning"))
    fmt::print(stderr, "dtsim: warning: {}: {}\n", out_, doc["calibration"]["warning"].get<std::string>());
  if (!quiet_) {
    std::cout << fmt::format("{} ranks over {}: alpha {:.2f} us, beta {:.3f} GB/s\n\n", env.world_size, backend_,
                             model.nominal.alpha_s * 1e6, model.nominal.beta_bytes_per_s / 1e9);
    for (const auto& [cls, f] : model.links)
      std::cout << fmt::format("link {}: alpha {:.2f} us, beta {:.3f} GB/s\n", cls, f.alpha_s * 1e6,
                               f.beta_bytes_per_s / 1e9);
    std::cout << calibration::samples_table(samples, model) << "model: " << out_ << "\n";
  }
  return 0;
}

int CalibrateCommands::run_compare() const {
  const auto scenario = runner::load_scenario(scenario_);
  calibration::CompareOptions o;
  o.model = calibration::load_model(model_);
  o.backend = backend_;
  o.sweep_sizes = calibration::geometric_sizes(runner::parse_size(sweep_min_), runner::parse_size(sweep_max_), 2.0);
  o.iters = iters_;
  const auto env = comm::LiveEnv::from_environment();
  const auto c = calibration::compare(scenario, env, o);
  if (env.rank != 0) return 0;
  const fs::path file = (out_dir_.empty() ? fs::path(scenario_).parent_path() : fs::path(out_dir_)) /
                        (fs::path(scenario_).stem().string() + ".compare.json");
  write_text(file, c.json.dump(1) + "\n");
  if (!quiet_) std::cout << c.table << "result: " << file.string() << "\n";
  return 0;
}

}  // namespace dtsim::cli
