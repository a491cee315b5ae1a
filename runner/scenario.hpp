// runner::Scenario: a run's inputs, parsed once from JSON into typed structs.
//
// Every field is checked where it is read: a wrong type, a value out of range, a missing
// required field or an unknown key raises ScenarioError with the JSON path (as a JSON
// Pointer, e.g. /algorithm/lr) and what was expected, on one line (control characters in
// the path or message are escaped). Each section is read and echoed next to what it
// describes: /workload by the workload registry (workloads/workload_registry.hpp),
// /algorithm by the algorithm registry (algorithms/registry.hpp), /topology and /network
// in network_models/ (topology_section.hpp, network_section.hpp), /compute in comm/
// (compute_section.hpp); this file holds the top-level fields and the checks across
// sections. The field reference lives in scenarios/README.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "algorithms/algorithm_spec.hpp"
#include "comm/compute_timing.hpp"
#include "network_models/network_config.hpp"
#include "network_models/topology_spec.hpp"
#include "config/scenario_error.hpp"
#include "sim/time_grid.hpp"
#include "workloads/workload_spec.hpp"

namespace dtsim::runner {

// A user's mistake in the scenario: its JSON path and kind (config/scenario_error.hpp).
using config::ErrorKind;
using config::ScenarioError;

struct Scenario {
  std::string name;
  int ranks = 1;
  std::int64_t steps = 1;
  std::uint64_t seed = 0;
  // The top-level "device" ("cpu", the default, or "cuda") is workload.device: every
  // rank's tensors, and so the algorithm's state, live there.
  workloads::WorkloadSpec workload;
  // Evaluate the rank-averaged model every eval_every steps (0: only after the last step).
  std::int64_t eval_every = 0;
  // Timing-only mode (emulated runs): rank 0 alone runs the algorithm's real kernels, as if
  // every rank held its data, and every rank replays its operations with size-only tensors
  // on the simulated network: times, bits and traffic for thousands of ranks in the memory
  // of one; no loss or accuracy (runner/run.hpp).
  bool timing_only = false;
  // The simulated clock's tick (sim/time_grid.hpp), a power of two: 2^-47 s (about
  // 7.1 fs, the spacing of doubles at 32 to 64 s) unless the scenario says otherwise;
  // 0: plain doubles.
  double time_resolution_s = 0x1p-47;
  algorithms::AlgorithmSpec algorithm;
  net::TopologySpec topology;
  net::NetworkConfig network;  // model, nominal link (latency, bandwidth), perturbations, algorithms
  comm::ComputeTiming compute;

  // The scenario with every default filled in, as echoed into results.
  nlohmann::json to_json() const;
  // The engine's time grid for emulated runs of it.
  sim::TimeGrid time_grid() const { return sim::TimeGrid::from_resolution(time_resolution_s); }
};

Scenario parse_scenario(const nlohmann::json& doc);
// What a scenario written in a file in `dir` means before parsing: a relative
// /workload/libsvm_file or /workload/data_dir is relative to `dir`, and
// /network/calibrated (a `dtsim calibrate` model file) fills in model, latency_us and
// bandwidth_GBps where the scenario does not set them. Throws ScenarioError.
void resolve_file_fields(nlohmann::json& doc, const std::filesystem::path& dir);
// Reads and parses a file; JSON syntax errors (and numbers beyond a double's range)
// become ScenarioError at path "/" with the line and column. parse_scenario and
// resolve_file_fields refuse documents nested deeper than kMaxJsonDepth
// (config/json_input.hpp).
Scenario load_scenario(const std::filesystem::path& file);

}  // namespace dtsim::runner
