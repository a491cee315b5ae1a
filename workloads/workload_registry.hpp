// workloads::WorkloadEntry and the registry: the one table of the workload types a
// scenario can name. Each type's entry lives next to its workload (logistic_regression.cpp,
// image_models.cpp, shape_models.cpp): its name, a one-line description, the scenario
// fields it reads, how it reads and echoes them, how it loads its data and builds a
// rank's workload, and what it needs in memory. The scenario loader, its to_json, the
// resource estimate, the error messages and the schema test read this table; nothing
// else lists workload types.
//
// Adding a workload type: its file (the workload and its entry function) and one line
// in workload_registry.cpp's table.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "workloads/workload_spec.hpp"

namespace dtsim::workloads {

// What one process and one rank of a workload hold, for the up-front resource estimate.
struct WorkloadFootprint {
  double elements = 0;                       // parameters
  std::vector<std::int64_t> sizes_backward;  // tensor sizes, backward order
  double data_bytes = 0;                     // per process (the dataset, shared by the ranks)
  double per_rank_bytes = 0;                 // per rank, besides parameters and gradients
};

struct WorkloadEntry {
  std::string name;
  std::string description;  // one line
  // The keys of /workload besides "type" it reads: its own, then (with_data_fields)
  // "data" and its data sources' fields.
  std::vector<std::string> fields;
  // The data sources (data_source.hpp) it trains on, the default first; none for the
  // shape-only models.
  std::vector<std::string> data_sources;
  // The JSON path a failure to load its data names, for a type without data sources
  // (a source names its own: workload_data_path).
  std::string data_path;
  // Its own fields that name files (relative to the scenario file's directory, as the
  // data sources' path fields are).
  std::vector<std::string> path_fields;
  void (*parse)(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext& ctx);
  // Writes its fields, every default filled in: parse(to_json(spec)) gives `spec` again.
  void (*to_json)(const WorkloadSpec& spec, nlohmann::json& out);
  // Loads (or generates) the data once per process; throws std::invalid_argument naming
  // a missing or malformed file.
  std::shared_ptr<const WorkloadData> (*load_data)(const WorkloadSpec& spec, std::uint64_t seed);
  std::unique_ptr<Workload> (*make)(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data, std::uint64_t seed,
                                    int rank, int ranks);
  WorkloadFootprint (*footprint)(const WorkloadSpec& spec, int ranks);
};

// In table order.
std::span<const WorkloadEntry* const> workload_entries();
// nullptr when no workload type has that name.
const WorkloadEntry* find_workload(std::string_view type);
// The entry of spec.type; throws std::logic_error for a type the loader would refuse.
const WorkloadEntry& workload_entry(const std::string& type);

// The /workload section: "type" (or its older name "kind"), its data source's fields,
// then the type's own; a field the type does not read is a ScenarioError (unknown_field)
// naming it.
WorkloadSpec parse_workload_section(config::ObjectReader& w, const WorkloadContext& ctx);
nlohmann::json workload_section_json(const WorkloadSpec& spec);

// Every path field of every data source and workload type (runner::resolve_file_fields).
std::vector<std::string> path_fields();

// spec.data with its source filled in: the type's default when a caller left it empty.
DataSpec workload_data(const WorkloadSpec& spec);

// The JSON path a failure to load spec's data names: its data source's, or its type's.
std::string workload_data_path(const WorkloadSpec& spec);

// The dataset on `device`: made on the CPU, then copied once, so every device sees the
// same numbers (the entries' load_data use it).
template <class Data, class Move>
std::shared_ptr<const Data> on_device(std::shared_ptr<const Data> data, at::Device device, Move move) {
  if (device.is_cpu()) return data;
  auto moved = std::make_shared<Data>();
  move(*data, *moved, device);
  return moved;
}

// The WorkloadData an entry's make() receives from its own load_data().
template <class T>
const T& data_for(const std::shared_ptr<const WorkloadData>& data, const std::string& type) {
  const auto* d = dynamic_cast<const T*>(data.get());
  if (!d) throw std::logic_error("make_workload: data was not loaded for " + type);
  return *d;
}

}  // namespace dtsim::workloads
