// dtsim_regress: the CI performance gate (logic in sweep/regress.hpp).
//
//   dtsim_regress benchmarks --baseline bench/baselines/benchmarks.json RUN.json... [--update]
//   dtsim_regress simulated --baseline bench/baselines/simulated.json [--update]
//
// Exit 0: within the margins (or baselines refreshed); 1: a regression, with a table of
// what got slower or changed; 2: bad input (a missing file, malformed JSON).
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "sweep/execute.hpp"
#include "sweep/regress.hpp"
#include "sweep/sweep.hpp"

namespace {

nlohmann::json read(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw dtsim::sweep::SweepError(fmt::format("{}: cannot read", file));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error&) {
    throw dtsim::sweep::SweepError(fmt::format("{}: not JSON", file));
  }
}

int report(const dtsim::sweep::CheckOutcome& outcome, const std::string& what) {
  std::cout << outcome.table;
  if (outcome.ok) {
    std::cout << fmt::format("{}: all within the baseline\n", what);
    return 0;
  }
  std::cout << fmt::format("\n{}: {} regression{}:\n", what, outcome.failures.size(), outcome.failures.size() == 1 ? "" : "s");
  for (const auto& f : outcome.failures) std::cout << "  " << f << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtsim_regress: compare benchmark ratios and simulated figures against committed baselines"};
  app.require_subcommand(1);
  std::string baseline;
  std::vector<std::string> runs;
  bool update = false;
  auto* bench = app.add_subcommand("benchmarks", "Google Benchmark JSON runs against bench/baselines/benchmarks.json");
  bench->add_option("--baseline", baseline, "Baseline JSON")->required();
  bench->add_option("runs", runs, "Google Benchmark JSON outputs")->required();
  bench->add_flag("--update", update, "Rewrite the baseline's ratios from these runs");
  auto* sim = app.add_subcommand("simulated", "Re-run the baseline's scenarios and compare their deterministic figures");
  sim->add_option("--baseline", baseline, "Baseline JSON")->required();
  sim->add_flag("--update", update, "Rewrite the baseline's figures from fresh runs");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    const auto base = read(baseline);
    if (bench->parsed()) {
      std::vector<nlohmann::json> docs;
      for (const auto& r : runs) docs.push_back(read(r));
      if (update) {
        dtsim::sweep::write_atomic(baseline, dtsim::sweep::refresh_benchmarks(base, docs).dump(2) + "\n");
        std::cout << "refreshed " << baseline << "\n";
        return 0;
      }
      return report(dtsim::sweep::check_benchmarks(base, docs), "benchmarks");
    }
    const auto dir = std::filesystem::path(baseline).parent_path();
    if (update) {
      dtsim::sweep::write_atomic(baseline, dtsim::sweep::refresh_simulated(base, dir).dump(2) + "\n");
      std::cout << "refreshed " << baseline << "\n";
      return 0;
    }
    return report(dtsim::sweep::check_simulated(base, dir), "simulated figures");
  } catch (const dtsim::sweep::SweepError& e) {
    fmt::print(stderr, "dtsim_regress: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    fmt::print(stderr, "dtsim_regress: failed: {}\n", what);
    return 2;
  }
}
