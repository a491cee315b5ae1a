// algorithms::AlgorithmEntry and the registry: the one table of the algorithms a
// scenario can name. Each algorithm's entry lives in its own .cpp, next to its step:
// its name, a one-line description, the paper, the scenario fields it reads, how it reads
// them and echoes them (parse / to_json), its factory and its memory footprint. The
// scenario loader, its to_json, the CLI help, the error messages and the schema test all
// read this table; nothing else lists algorithm names.
//
// Adding an algorithm: its .hpp/.cpp (the step and the entry function) and one line in
// registry.cpp's table.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/algorithm_spec.hpp"
#include "algorithms/memory_footprint.hpp"
#include "config/object_reader.hpp"

namespace dtsim::net {
class Topology;
}

namespace dtsim::algorithms {

class Algorithm;  // algorithm.hpp

// What a section's parse may need from the rest of the scenario.
struct SpecContext {
  std::uint64_t seed = 0;  // the scenario's seed (the compressor's default seed)
};

struct AlgorithmEntry {
  std::string name;
  std::string description;  // one line
  std::string paper;        // the paper (and the reference code) it follows
  // The keys of /algorithm besides "name" it reads: the optimizer's (lr, momentum,
  // dampening, weight_decay, nesterov, lr_schedule) and its own.
  std::vector<std::string> fields;
  // Reads the algorithm's own fields (not the optimizer's, not "name") into `spec`.
  void (*parse)(config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext& ctx);
  // Writes them, every default filled in: parse(to_json(spec)) gives `spec` again.
  void (*to_json)(const AlgorithmSpec& spec, nlohmann::json& out);
  std::unique_ptr<Algorithm> (*make)(const AlgorithmSpec& spec, const net::Topology& topology, int rank);
  MemoryFootprint (*memory)(const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t steps);
  // Optional: checks the spec against the workload's parameter names (in parameter order)
  // before any rank starts, throwing config::ScenarioError naming the field to change
  // (Streaming DiLoCo's fragments against the model's blocks). nullptr: nothing to check.
  void (*check_parameters)(const AlgorithmSpec& spec, const std::vector<std::string>& names) = nullptr;
  // Optional: the field (under /algorithm) of a schedule that `spec` counts in epochs of
  // the rank's data shard (sparsified SGD's compress_warmup_epochs), "" when it counts
  // none; the loader then refuses a workload without data. nullptr: never counts epochs.
  std::string (*epoch_schedule_field)(const AlgorithmSpec& spec) = nullptr;
  // False when its ranks send point to point to ranks that are not their topology
  // neighbours (1-bit Adam's phase 1 to every chunk's server): one representative rank's
  // trace cannot stand for them, so timing-only mode refuses it before running anything.
  bool replays_from_one_rank = true;
};

// The names of registry.hpp's table (algorithm_entries()), in its order.
const std::vector<std::string>& algorithm_names();
// The scenario fields (keys of the "algorithm" object besides "name") that algorithm
// `name` reads; setting any other is an error naming the field.
const std::vector<std::string>& algorithm_fields(const std::string& name);

// `sizes`: the workload's tensor sizes in backward order (DistOpt's partitions).
MemoryFootprint memory_footprint(const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t steps);

// In table order.
std::span<const AlgorithmEntry* const> algorithm_entries();
// nullptr when no algorithm has that name.
const AlgorithmEntry* find_algorithm(std::string_view name);

// The /algorithm section: "name", the optimizer fields and the entry's own; a field the
// named algorithm does not read is a ScenarioError (unknown_field) naming it.
AlgorithmSpec parse_algorithm_section(config::ObjectReader& a, const SpecContext& ctx);
nlohmann::json algorithm_section_json(const AlgorithmSpec& spec);

}  // namespace dtsim::algorithms
