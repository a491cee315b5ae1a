// workloads::DataSpec and the data-source registry: the one table of the data sets a
// workload can train on (data_sources.cpp lists them; each source's entry lives in
// sources/<name>.cpp with its reader or generator). Each source says what kind of
// samples it yields, and a workload type's entry (workload_registry.hpp) accepts every
// source of the kind it trains on, its default first; a scenario picks one with
// /workload/data, or by naming a field only that source reads (libsvm_file), or gets the
// type's first. The scenario loader, its to_json, the resource estimate, the relative
// path resolution, `dtsim list data` and the schema test read this table; nothing else
// lists data sources.
//
// Adding a data source: sources/<name>.hpp (its settings struct) and sources/<name>.cpp
// (its entry function, parse / to_json / shape / load, and the kind of samples it
// yields), and one line in data_sources.cpp's table; every workload type that trains on
// that kind then accepts it.
#pragma once

#include <any>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/entry_settings.hpp"
#include "config/object_reader.hpp"
#include "workloads/labelled_data.hpp"

namespace dtsim::workloads {

// What a workload's or a data source's parse may need from the rest of the scenario.
struct WorkloadContext {
  int ranks = 1;
};

// A workload's data: the source's name and its settings struct (sources/<name>.hpp), as
// the source's parse stored it; read it back with data_settings<T>.
struct DataSpec {
  // The source's name; empty in a WorkloadSpec built by hand: its type's default
  // (workload_data()). The scenario loader always sets it.
  std::string source;
  // Empty in a spec built by hand: the struct's defaults.
  std::any settings;
};

// The settings struct the source's parse stored in spec.settings (config/entry_settings.hpp).
template <class Settings>
const Settings& data_settings(const DataSpec& spec) {
  return config::entry_settings<Settings>(spec.settings);
}

// The settings shared by the sources that read a directory of image files (fashion_mnist,
// cifar10): the directory, and the first N training and test images kept (0: all).
struct ImageFiles {
  std::string data_dir;
  std::int64_t train_samples = 0;
  std::int64_t test_samples = 0;
};

// A source's data as counts and shapes, known without loading it. The counts are the
// set's (or the scenario's cut of it); a file may hold fewer, the sample shape is exact.
struct DataShape {
  std::int64_t train = 0;
  std::int64_t test = 0;
  std::vector<std::int64_t> sample;  // one sample: {features} or {C, H, W}
  std::int64_t classes = 0;
  // Bytes of the file(s) a load reads and holds while converting them (0: generated).
  double file_bytes = 0;

  std::int64_t sample_elements() const;
};

// The settings shared by the sources that are one file whose counts, sample shape and
// classes their parse reads (tensors, tokens).
struct SourceFile {
  std::string path;
  DataShape read;
};

// What a source's samples are: what decides which workload types train on it.
enum class SampleKind {
  binary_vectors,    // feature vectors with 0 / 1 labels (logistic regression)
  labelled_samples,  // samples of any shape with class labels (the image models, torchscript)
  token_windows,     // token sequences with next-token targets (language models)
};

struct DataSourceEntry {
  std::string name;
  SampleKind yields;
  std::string description;  // one line
  // The keys of /workload it reads.
  std::vector<std::string> fields;
  // A field whose presence selects this source when /workload/data is absent ("": none).
  std::string selected_by;
  // Of its fields, the file or directory paths (relative to the scenario file's directory).
  std::vector<std::string> path_fields;
  // The JSON path a failure to load names.
  std::string data_path;
  void (*parse)(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx);
  // Writes its fields, every default filled in: parse(to_json(spec)) gives `spec` again.
  void (*to_json)(const DataSpec& spec, nlohmann::json& out);
  DataShape (*shape)(const DataSpec& spec);
  // The data on the CPU; throws std::invalid_argument naming a missing or malformed file.
  std::shared_ptr<const LabelledData> (*load)(const DataSpec& spec, std::uint64_t seed);
  // For a model `who` that takes square images of one side: makes the source's images
  // that side where the scenario left it to the source (Fashion-MNIST pads its 28 x 28 to
  // 32 x 32), and throws a ScenarioError naming the field where the scenario set another.
  // nullptr: the side is the data's (the model then checks the sample shape).
  void (*fit_image_side)(const config::ObjectReader& w, DataSpec& spec, std::int64_t side, std::string_view who) = nullptr;
};

// In table order.
std::span<const DataSourceEntry* const> data_source_entries();
// nullptr when no source has that name.
const DataSourceEntry* find_data_source(std::string_view name);
// The entry called `name`; std::logic_error for a name the table lacks (a caller's bug).
const DataSourceEntry& data_source_entry(const std::string& name);
std::vector<std::string> data_source_names();
// Every path field of every source (runner::resolve_file_fields).
std::vector<std::string> data_path_fields();

// The sources yielding `kind`: `default_source` first, then the others in table order
// (a workload entry's data_sources). std::logic_error when the default yields another kind.
std::vector<std::string> sources_yielding(SampleKind kind, const std::string& default_source);
// `own` fields, "data", then every field of the `sources` (a workload entry's field list).
std::vector<std::string> with_data_fields(std::vector<std::string> own, const std::vector<std::string>& sources);

// The data fields of a /workload object whose type accepts `sources` (first: default):
// the source, then its fields. A field of another accepted source is a ScenarioError
// (unknown_field) naming both.
DataSpec parse_data_fields(config::ObjectReader& w, const std::vector<std::string>& sources, const std::string& type,
                           const WorkloadContext& ctx);
// The fields of a source that reads a directory of image files (fashion_mnist, cifar10):
// data_dir (required when `default_dir` is empty), train_samples, test_samples (0: all,
// else at least one per rank); and their echo.
ImageFiles parse_image_files(config::ObjectReader& w, const WorkloadContext& ctx, const std::string& default_dir);
void image_files_json(const ImageFiles& files, nlohmann::json& out);

// "data" and the source's fields.
void data_fields_json(const DataSpec& spec, nlohmann::json& out);

// The source's data, loaded (on the CPU) and checked against its shape.
std::shared_ptr<const LabelledData> load_data_source(const DataSpec& spec, std::uint64_t seed);

}  // namespace dtsim::workloads
