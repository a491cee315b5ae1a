#include "cli/collective_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/exit_codes.hpp"
#include "config/closest_name.hpp"
#include "config/json_input.hpp"
#include "config/closest_name.hpp"
#include "config/scenario_error.hpp"
#include "network_models/nccl/nccl_env.hpp"
#include "network_models/nccl/presets.hpp"
#include "network_models/network_model.hpp"
#include "runner/measured_comparison.hpp"
#include "sweep/svg.hpp"

namespace dtsim::cli {

namespace {

// alltoall's n (n - 1) messages a size: 1,024 ranks (a million messages) take seconds.
void check_alltoall_ranks(const runner::CollectiveSweep& sweep) {
  constexpr int kMaxAllToAllRanks = 1024;
  if (sweep.op == net::NcclTestOp::AllToAll && sweep.ranks > kMaxAllToAllRanks)
    throw config::InputError(fmt::format("-n/--ranks: alltoall sends n (n - 1) messages per size; expected at most {} ranks, got {}",
                                         kMaxAllToAllRanks, sweep.ranks));
}

// parse(text), its std::invalid_argument (the parsers' refusal) as the flag's
// InputError, prefixed with the flag and kept on one line (the text is the user's, and
// may hold anything).
template <typename F>
auto flag(const char* name, F&& parse) {
  try {
    return parse();
  } catch (const std::invalid_argument& e) {
    throw config::InputError(fmt::format("{}: {}", name, e.what()));
  }
}

}  // namespace

CollectiveCommand::CollectiveCommand(CLI::App& app) {
  cmd_ = app.add_subcommand(
      "collective", "Simulate one collective over a range of sizes and print the nccl-tests table (size, count, type, "
                    "redop, root, time, algbw, busbw) for the simulated network");
  cmd_->add_option("--op", op_, "allreduce, reducescatter, allgather, broadcast, reduce (nccl model only), sendrecv or alltoall (nccl-tests' operations)")->capture_default_str();
  cmd_->add_option("--algo", algo_,
                   net::algorithm_names(", ", " or ") +
                       "; auto: per size, the fastest of the single-port algorithms simulated alone on this "
                       "topology and model (by closed form for analytical), named in the algo column")
      ->capture_default_str();
  cmd_->add_option("-b,--minbytes", min_, "Smallest size (bytes; K, M, G suffixes)")->capture_default_str();
  cmd_->add_option("-e,--maxbytes", max_, "Largest size")->capture_default_str();
  cmd_->add_option("-f,--stepfactor", factor_, "Multiply the size by this between rows")->capture_default_str();
  cmd_->add_option("-i,--stepbytes", step_, "Add this many bytes between rows instead");
  cmd_->add_option("--topology", topology_,
                   "ring, complete, star, hypercube, exponential, torus:AxB[xC], fat_tree:K, hierarchical:G[:direct]")
      ->capture_default_str();
  cmd_->add_option("-n,--ranks", ranks_, "Rank count (default: the torus's size; required otherwise)");
  cmd_->add_option("--model", model_, net::network_model_names(", ", " or "))->capture_default_str();
  cmd_->add_option("--latency-us", latency_us_, "Per-link latency")->capture_default_str();
  cmd_->add_option("--bandwidth-GBps", bandwidth_GBps_, "Per-link bandwidth (1e9 bytes/s)")->capture_default_str();
  cmd_->add_option("-r,--root", root_, "Broadcast's or reduce's root")->capture_default_str();
  cmd_->add_option("--json", json_, "Also write the table as JSON to this file");
  cmd_->add_option("--against", against_,
                   "nccl-tests' output, or dtsim_nccl_bench's (text or --json), in a file: run its operation, ranks, -g "
                   "and sizes, and print the model beside each measured size (in-place time and busbw, error, and the "
                   "median, geometric mean and worst |error|)");
  cmd_->add_option("--svg", svg_, "With --against: also draw the measured and predicted bus bandwidth against size (SVG)");
  cmd_->add_option("--system", system_,
                   fmt::format("--model nccl: the machine, a preset ({}) or a system JSON file", net::nccl::system_preset_names()));
  cmd_->add_option("--nodes", nodes_, "--model nccl: nodes of the system (default: the system's; -n defaults to all their GPUs)");
  cmd_->add_option("--nccl-algo", nccl_algo_, "--model nccl: as NCCL_ALGO (Tree, Ring, CollNetDirect, CollNetChain, NVLS, "
                                              "NVLSTree, PAT; a comma-separated list, or ^ and the ones to leave out; from "
                                              "NCCL 2.24 also per collective: \"ring;allreduce:tree\")");
  cmd_->add_option("--nccl-proto", nccl_proto_, "--model nccl: as NCCL_PROTO (LL, LL128, Simple; from NCCL 2.24 also per "
                                                "collective: \"^LL128;allgather:LL\")");
  for (const auto& var : net::nccl::nccl_env_vars())
    cmd_->add_option(var.flag, env_.*var.value, fmt::format("--model nccl: as {}, {}", var.name, var.doc))->capture_default_str();
  cmd_->add_option("--nccl-version", nccl_version_,
                   fmt::format("--model nccl: the NCCL release whose constants and rules apply, {} (default: the "
                               "system's)", net::nccl::modelled_nccl_releases()));
  cmd_->add_option("-g,--ngpus", gpus_per_thread_,
                   "--model nccl: GPUs whose kernels one thread launches, as nccl-tests' -g (the host's launches can "
                   "outlast the GPUs)")
      ->capture_default_str();
}

namespace {

// --system: a preset's name, or a system JSON file.
net::nccl::System read_system(const std::string& text) {
  if (const auto* preset = net::nccl::find_system_preset(text)) return *preset;
  const bool looks_like_file = text.find('/') != std::string::npos || text.find('.') != std::string::npos;
  if (!looks_like_file)
    throw config::InputError(fmt::format("--system: expected a preset ({}) or a system JSON file, got \"{}\"{}",
                                         net::nccl::system_preset_names(), text,
                                         config::did_you_mean(text, net::nccl::system_preset_list())));
  try {
    return net::nccl::read_system_file(text);
  } catch (const config::InputError& e) {
    throw config::InputError(fmt::format("--system: {}", e.what()));
  }
}

// Measured and predicted busbw against size, both axes logarithmic.
sweep::Chart comparison_chart(const runner::MeasuredComparison& c) {
  sweep::Chart chart{.title = fmt::format("{}, {} ranks: measured and model {}", net::to_string(c.sweep.op), c.sweep.ranks,
                                          c.sweep.model),
                     .x_label = "size (bytes)",
                     .y_label = "bus bandwidth (GB/s)",
                     .x_log = true,
                     .y_log = true};
  sweep::Series measured{.name = "measured: " + c.source + " (in place)"}, predicted{.name = "dtsim, model " + c.sweep.model};
  for (const auto& r : c.rows) {
    measured.x.push_back(static_cast<double>(r.bytes));
    measured.y.push_back(r.measured_busbw_GBps);
    predicted.x.push_back(static_cast<double>(r.bytes));
    predicted.y.push_back(r.predicted_busbw_GBps);
  }
  chart.series = {std::move(measured), std::move(predicted)};
  chart.notes.push_back(c.predicted.title);
  const auto& s = c.summary;
  if (s.points > 0)
    chart.notes.push_back(fmt::format("|error| over {} sizes: median {:.1f} %, geometric mean {:.1f} %, worst {:.1f} % at {} bytes",
                                      s.points, 100 * s.median, 100 * s.geomean, 100 * s.worst, s.worst_bytes));
  return chart;
}

}  // namespace

std::optional<net::NcclTestsRun> CollectiveCommand::measured_run() const {
  if (cmd_->count("--against") == 0) return std::nullopt;
  // A file, not a device or pipe that might never end; nccl-tests' output, even with
  // NCCL_DEBUG=INFO, is far below the cap.
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{64} << 20;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(against_, ec))
    throw config::InputError(config::one_line(fmt::format("--against: cannot read \"{}\" (not a file)", against_)));
  if (const auto size = std::filesystem::file_size(against_, ec); ec || size > kMaxBytes)
    throw config::InputError(config::one_line(fmt::format("--against: \"{}\" is larger than 64 MiB", against_)));
  std::ifstream in(against_, std::ios::binary);
  if (!in) throw config::InputError(config::one_line(fmt::format("--against: cannot read \"{}\"", against_)));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return flag("--against", [&] {
    try {
      // dtsim_nccl_bench --json's table, or nccl-tests' (or dtsim_nccl_bench's) printed text.
      const auto first = text.find_first_not_of(" \t\r\n");
      if (first != std::string::npos && text[first] == '{') {
        const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (doc.is_discarded()) throw std::invalid_argument("not JSON (dtsim_nccl_bench --json writes it)");
        return net::measured_table_from_json(doc);
      }
      return net::parse_nccl_tests_output(text);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(config::one_line(fmt::format("{}: {}", against_, e.what())));
    }
  });
}

runner::CollectiveSweep CollectiveCommand::sweep() const {
  const auto against = measured_run();
  return sweep(against ? &*against : nullptr);
}

runner::CollectiveSweep CollectiveCommand::sweep(const net::NcclTestsRun* against) const {
  if (!against && cmd_->count("--svg") > 0) throw config::InputError("--svg: draws the --against comparison (give --against FILE)");
  runner::CollectiveSweep sweep;
  sweep.op = flag("--op", [&] { return runner::parse_test_op(op_); });
  int ranks = ranks_;
  if (against) {
    // The measured run's operation, ranks and sizes.
    for (const auto& [f, name] : {std::pair{"--minbytes", "-b/--minbytes"}, std::pair{"--maxbytes", "-e/--maxbytes"},
                                  std::pair{"--stepfactor", "-f/--stepfactor"}, std::pair{"--stepbytes", "-i/--stepbytes"}})
      if (cmd_->count(f) > 0) throw config::InputError(fmt::format("{}: --against takes the sizes from its file", name));
    if (against->op) {
      if (cmd_->count("--op") > 0 && sweep.op != *against->op)
        throw config::InputError(fmt::format("--op: {}, but --against measured {}", net::to_string(sweep.op),
                                             net::to_string(*against->op)));
      sweep.op = *against->op;
    }
    if (against->ranks > 0) {
      if (cmd_->count("--ranks") > 0 && ranks_ != against->ranks)
        throw config::InputError(fmt::format("-n/--ranks: {}, but --against lists {} ranks", ranks_, against->ranks));
      ranks = against->ranks;
    }
    for (const auto& p : against->points) {
      // As -e's bound: far beyond any GPU's memory, and where sizes in doubles stop being exact.
      if (p.bytes > (std::int64_t{1} << 50))
        throw config::InputError(fmt::format("--against: line {}: size {} is beyond 2^50 bytes (1048576G)", p.line, p.bytes));
      sweep.sizes.push_back(p.bytes);
    }
  }
  if (!net::find_network_model(model_))
    throw config::InputError(
        config::one_line(fmt::format("--model: expected one of {}, got \"{}\"{}", net::network_model_names(), model_,
                                     config::did_you_mean(model_, net::network_models()))));
  if (net::network_model(model_).make_clock) return machine_sweep(std::move(sweep), ranks, against);
  std::vector<std::string> machine_flags{"--system", "--nodes", "--nccl-algo", "--nccl-proto", "--nccl-version", "--ngpus"};
  for (const auto& var : net::nccl::nccl_env_vars()) machine_flags.emplace_back(var.flag);
  for (const std::string& f : machine_flags)
    if (cmd_->count(f) > 0) throw config::InputError(fmt::format("{}: only --model nccl reads it", f));
  if (sweep.op == net::NcclTestOp::Reduce)
    throw config::InputError(fmt::format("--op reduce: only --model nccl times a reduce (dtsim has no reduce schedule for {})", model_));
  if (!net::collective_kind(sweep.op) && cmd_->count("--algo") > 0)
    throw config::InputError(fmt::format("--algo: {} sends its messages directly (no algorithm to choose)", net::to_string(sweep.op)));
  sweep.algorithm = flag("--algo", [&] { return net::parse_algorithm(algo_); });
  sweep.topology = flag("--topology", [&] { return net::parse_topology(topology_); });
  sweep.ranks = ranks;
  if (sweep.ranks == 0 && sweep.topology.kind == "torus") {
    std::int64_t product = 1;
    for (int d : sweep.topology.dims) {
      product *= d;
      if (product > (1 << 20))
        throw config::InputError(fmt::format("--topology: torus:{}: expected at most {} ranks",
                                                fmt::join(sweep.topology.dims, "x"), 1 << 20));
    }
    sweep.ranks = static_cast<int>(product);
  }
  // A scenario's limit on ranks (runner/scenario.cpp): the topologies' node arithmetic is
  // in int, and exponential's doubling step overflows beyond 2^30.
  if (sweep.ranks < 1) throw config::InputError("--ranks: expected a rank count >= 1");
  if (sweep.ranks > (1 << 20))
    throw config::InputError(fmt::format("--ranks: expected at most {} ranks, got {}", 1 << 20, sweep.ranks));
  if (sweep.topology.kind == "torus") {
    std::int64_t product = 1;
    for (int d : sweep.topology.dims) product = std::min<std::int64_t>(product * d, std::int64_t{1} << 31);
    if (product != sweep.ranks)
      throw config::InputError(fmt::format("--topology: torus:{} holds {} ranks, not --ranks {}",
                                              fmt::join(sweep.topology.dims, "x"),
                                              product >> 31 ? "more than 2^31" : std::to_string(product), sweep.ranks));
  }
  // A topology that cannot hold the ranks (a fat-tree's k^3 / 4) is the flags' error.
  flag("--topology", [&] { return net::make_topology(sweep.topology, sweep.ranks, {}).size(); });
  check_alltoall_ranks(sweep);
  sweep.model = model_;
  sweep.link = {latency_us_ * 1e-6, bandwidth_GBps_ * 1e9};
  // An infinite latency (CLI11 reads 1e309 as inf) would schedule events at inf.
  if (!(sweep.link.bandwidth_bytes_per_s > 0) || !(sweep.link.latency_s >= 0) || !std::isfinite(sweep.link.latency_s))
    throw config::InputError("--latency-us must be finite and >= 0, and --bandwidth-GBps > 0");
  sweep.min_bytes = flag("-b/--minbytes", [&] { return runner::parse_size(min_); });
  sweep.max_bytes = flag("-e/--maxbytes", [&] { return runner::parse_size(max_); });
  if (sweep.max_bytes < sweep.min_bytes)
    throw config::InputError(
        fmt::format("-e/--maxbytes: expected at least -b/--minbytes ({}), got {}", sweep.min_bytes, sweep.max_bytes));
  // Every time the sweep computes must be finite: one collective takes at most about
  // 2 x ranks latencies plus ranks x the largest size over the bandwidth (a parameter
  // server's root), and 1e-320 GB/s or a latency of 1e308 us make that inf.
  const std::int64_t largest =
      sweep.sizes.empty() ? sweep.max_bytes : *std::max_element(sweep.sizes.begin(), sweep.sizes.end());
  const double worst = 4.0 * (1 << 20) *
                       (sweep.link.latency_s + static_cast<double>(largest) / sweep.link.bandwidth_bytes_per_s);
  if (!std::isfinite(worst))
    throw config::InputError(fmt::format("--latency-us, --bandwidth-GBps: a collective of {} ({} bytes) "
                                            "over {:g} us / {:g} GB/s links would take longer than any finite time",
                                            sweep.sizes.empty() ? "-e/--maxbytes" : "--against's largest size", largest,
                                            latency_us_, bandwidth_GBps_));
  sweep.factor = factor_;
  if (!step_.empty()) sweep.step_bytes = flag("-i/--stepbytes", [&] { return runner::parse_size(step_); });
  if (sweep.step_bytes <= 0 && !(sweep.factor > 1.0))
    throw config::InputError(fmt::format("-f/--stepfactor: expected a factor > 1, got {}", sweep.factor));
  sweep.root = root_;
  if (sweep.root < 0 || sweep.root >= sweep.ranks) throw config::InputError("--root: expected a rank of the job");
  return sweep;
}

// NCCL_ALGO (algo) or NCCL_PROTO as the measured run printed it on `line` (NCCL_DEBUG=INFO;
// "" where it did not), else the flag's: a flag that enables other algorithms (protocols)
// than the run did is refused, as is a printed value NCCL would not take.
std::string CollectiveCommand::against_setting(bool algo, const std::string& flag_value, const std::string& printed,
                                               int line) const {
  const char* flag_name = algo ? "--nccl-algo" : "--nccl-proto";
  if (printed.empty()) return flag_value;
  auto enables = [&](const std::string& list) {
    const auto o = algo ? net::nccl::parse_overrides(list, "") : net::nccl::parse_overrides("", list);
    std::vector<int> on;  // every collective's, in order
    for (int c = 0; c < net::nccl::kColls; ++c) {
      if (algo) on.insert(on.end(), o.algo_enabled[c].begin(), o.algo_enabled[c].end());
      else on.insert(on.end(), o.proto_enabled[c].begin(), o.proto_enabled[c].end());
    }
    return on;
  };
  std::vector<int> ran;
  try {
    ran = enables(printed);
  } catch (const std::invalid_argument& e) {
    throw config::InputError(config::one_line(fmt::format("--against: line {}: {}", line, e.what())));
  }
  if (cmd_->count(flag_name) > 0 && flag(flag_name, [&] { return enables(flag_value); }) != ran)
    throw config::InputError(
        config::one_line(fmt::format("{}: {}, but --against ran with {} (line {})", flag_name, flag_value, printed, line)));
  return printed;
}

// The run's NCCL environment besides NCCL_ALGO / NCCL_PROTO (nccl_env.hpp): each flag's, or
// the value the measured run printed (NCCL_DEBUG=INFO's "NCCL_MAX_NCHANNELS set by
// environment to 8."); a flag that differs from the printed value (as NCCL reads it) is
// refused.
net::nccl::NcclEnv CollectiveCommand::nccl_env(const net::NcclTestsRun* against) const {
  net::nccl::NcclEnv env = env_;
  for (const auto& var : net::nccl::nccl_env_vars()) {
    int& value = env.*var.value;
    if (value < var.least || value > var.most)
      throw config::InputError(fmt::format("{}: expected {} to {}, got {}", var.flag, var.least, var.most, value));
    if (!against) continue;
    const auto printed = against->nccl_params.find(var.name);
    if (printed == against->nccl_params.end()) continue;
    const auto [ran, line] = printed->second;
    // A channel count outside the range counts as its nearest end, as NCCL clamps it (a
    // maximum above MAXCHANNELS, or below 1; a minimum below 0; -1, "NCCL's own", for
    // NCCL_NCHANNELS_PER_NET_PEER); a step must be one dtsim models.
    if (var.bytes && (ran < var.least || ran > var.most))
      throw config::InputError(fmt::format("--against: line {}: {} {} is outside {} - {}", line, var.name, ran, var.least, var.most));
    const int ran_value = static_cast<int>(std::clamp<long long>(ran, var.least, var.most));
    if (cmd_->count(var.flag) > 0 && value != ran_value)
      throw config::InputError(fmt::format("{}: {}, but --against ran with {} {} (line {})", var.flag, value, var.name, ran, line));
    value = ran_value;
  }
  return env;
}

// The release the measured run names is the one modelled: --nccl-version may only agree with
// it, or choose one for a release dtsim does not model (which is refused without it).
void CollectiveCommand::reconcile_nccl_release(const net::NcclTestsRun& against, net::nccl::System& system) const {
  std::optional<net::nccl::NcclRelease> ran;
  try {
    ran = net::nccl::parse_nccl_release(against.nccl_version);
  } catch (const std::invalid_argument&) {
  }
  // Where the text printed it (dtsim_nccl_bench's JSON has no lines).
  const std::string where = against.nccl_version_line > 0 ? fmt::format(" (line {})", against.nccl_version_line) : "";
  if (cmd_->count("--nccl-version") > 0) {
    if (ran && *ran != system.nccl)
      throw config::InputError(
          fmt::format("--nccl-version: {}, but --against ran NCCL {}{}", nccl_version_, against.nccl_version, where));
    return;
  }
  if (!ran)
    throw config::InputError(fmt::format("--against: NCCL {} ran{}, which dtsim does not model; compare it with a release "
                                         "it does: --nccl-version {}", against.nccl_version, where, net::nccl::modelled_nccl_releases()));
  system.nccl = *ran;
}

// The flags of a model of a described machine (nccl): the system and NCCL's overrides
// instead of a topology and links.
runner::CollectiveSweep CollectiveCommand::machine_sweep(runner::CollectiveSweep sweep, int ranks,
                                                         const net::NcclTestsRun* against) const {
  for (const char* f : {"--topology", "--latency-us", "--bandwidth-GBps"})
    if (cmd_->count(f) > 0) throw config::InputError(fmt::format("{}: --model {} takes its links from --system", f, model_));
  if (algo_ != "auto")
    throw config::InputError(fmt::format("--algo: --model {} runs NCCL's choice (--nccl-algo, as NCCL_ALGO, restricts it)", model_));
  if (system_.empty()) throw config::InputError(fmt::format("--system: --model {} needs a system (a preset: {}; or a JSON file)",
                                                            model_, net::nccl::system_preset_names()));
  auto config = std::make_shared<net::nccl::Config>();
  config->system = read_system(system_);
  if (cmd_->count("--nodes") > 0) {
    if (nodes_ < 1 || nodes_ > (1 << 14)) throw config::InputError(fmt::format("--nodes: expected 1 to {}, got {}", 1 << 14, nodes_));
    config->system.nodes = nodes_;
  } else if (against && ranks > config->system.gpus() && ranks % config->system.gpus_per_node == 0) {
    config->system.nodes = ranks / config->system.gpus_per_node;  // the measured run's nodes
  }
  if (config->system.nodes > 1 && (config->system.network.nics_per_node < 1 || !(config->system.network.nic_Gbps > 0)))
    throw config::InputError(fmt::format("--nodes: {} nodes of {} need a network (the system has no NICs)", config->system.nodes,
                                         config->system.name));
  const std::string algo = against_setting(true, nccl_algo_, against ? against->nccl_algo : "", against ? against->nccl_algo_line : 0);
  const std::string proto =
      against_setting(false, nccl_proto_, against ? against->nccl_proto : "", against ? against->nccl_proto_line : 0);
  const bool algo_from_run = against && !against->nccl_algo.empty();
  config->overrides = flag("--nccl-algo", [&] { return net::nccl::parse_overrides(algo, ""); });
  config->overrides = flag("--nccl-proto", [&] { return net::nccl::parse_overrides(algo, proto); });
  config->env = nccl_env(against);
  if (!nccl_version_.empty())
    config->system.nccl = flag("--nccl-version", [&] { return net::nccl::parse_nccl_release(nccl_version_); });
  if (against && !against->nccl_version.empty()) reconcile_nccl_release(*against, config->system);
  flag(cmd_->count("--nccl-version") > 0 || !against ? "--nccl-version" : "--against (the NCCL it ran)", [&] {
    net::nccl::check_release_runs(config->system);
    return 0;
  });
  sweep.model = model_;
  sweep.algorithm = net::Algorithm::Auto;
  sweep.ranks = ranks == 0 ? config->system.gpus() : ranks;
  // The ranks are the measured run's when --against gave them.
  const auto machine = flag(against && against->ranks > 0 ? "--against (the ranks it lists)" : "-n/--ranks",
                            [&] { return net::nccl::make_machine(config->system, sweep.ranks, config->env); });
  (void)flag(algo_from_run ? "--against (its NCCL_ALGO)" : "--nccl-algo",
             [&] { return net::nccl::tune(machine, config->overrides); });
  check_alltoall_ranks(sweep);
  // A collective NCCL_ALGO leaves nothing to run (where the release fails).
  flag(algo_from_run ? "--against (its NCCL_ALGO)" : "--nccl-algo",
       [&] { return net::nccl::Clock(config, sweep.ranks).machine().ranks; });
  sweep.link = net::nccl::nominal_link(config->system);
  sweep.nccl = config;
  int gpus_per_thread = gpus_per_thread_;
  if (against && against->gpus_per_thread > 0) {
    if (cmd_->count("--ngpus") > 0 && gpus_per_thread_ != against->gpus_per_thread)
      throw config::InputError(fmt::format("-g/--ngpus: {}, but --against ran nGpus {}", gpus_per_thread_,
                                           against->gpus_per_thread));
    gpus_per_thread = against->gpus_per_thread;
  }
  if (gpus_per_thread < 1 || gpus_per_thread > sweep.ranks)
    throw config::InputError(fmt::format("-g/--ngpus: expected 1 to the rank count ({}), got {}", sweep.ranks, gpus_per_thread));
  sweep.gpus_per_thread = gpus_per_thread;
  sweep.min_bytes = flag("-b/--minbytes", [&] { return runner::parse_size(min_); });
  sweep.max_bytes = flag("-e/--maxbytes", [&] { return runner::parse_size(max_); });
  if (sweep.max_bytes < sweep.min_bytes)
    throw config::InputError(
        fmt::format("-e/--maxbytes: expected at least -b/--minbytes ({}), got {}", sweep.min_bytes, sweep.max_bytes));
  // Far beyond any GPU's memory, and where sizes in doubles stop being exact.
  if (sweep.max_bytes > (std::int64_t{1} << 50))
    throw config::InputError(fmt::format("-e/--maxbytes: expected at most 2^50 bytes (1048576G), got {}", sweep.max_bytes));
  sweep.factor = factor_;
  if (!step_.empty()) sweep.step_bytes = flag("-i/--stepbytes", [&] { return runner::parse_size(step_); });
  if (sweep.step_bytes <= 0 && !(sweep.factor > 1.0))
    throw config::InputError(fmt::format("-f/--stepfactor: expected a factor > 1, got {}", sweep.factor));
  sweep.root = root_;
  if (sweep.root < 0 || sweep.root >= sweep.ranks) throw config::InputError("--root: expected a rank of the job");
  return sweep;
}

std::optional<int> CollectiveCommand::run() const {
  if (!parsed()) return std::nullopt;
  return exit_code_of([&] {
    const auto against = measured_run();
    const auto s = sweep(against ? &*against : nullptr);
    if (against) {
      const auto c = flag("--against", [&] { return runner::compare_with_measured(s, *against, against_); });
      std::cout << runner::format_measured_comparison(c);
      if (!json_.empty()) {
        std::ofstream out(json_);
        out << runner::measured_comparison_json(c).dump(2) << '\n';
        if (!out) throw std::runtime_error("cannot write " + json_);
      }
      if (!svg_.empty()) {
        std::ofstream out(svg_);
        out << sweep::render_svg(comparison_chart(c));
        if (!out) throw std::runtime_error("cannot write " + svg_);
      }
      return 0;
    }
    const auto rows = runner::run_collective_sweep(s);
    std::cout << runner::format_collective_table(s, rows);
    if (!json_.empty()) {
      std::ofstream out(json_);
      out << runner::collective_table_json(s, rows).dump(2) << '\n';
      if (!out) throw std::runtime_error("cannot write " + json_);
    }
    return 0;
  });
}

}  // namespace dtsim::cli
