#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/field_recorder.hpp"
#include "workloads/data_source.hpp"

namespace dtsim::workloads {

// Each entry is defined with its reader or generator (the file named on its line).
const DataSourceEntry& synthetic_source();      // sources/synthetic.cpp
const DataSourceEntry& libsvm_source();         // sources/libsvm.cpp
const DataSourceEntry& fashion_mnist_source();  // sources/fashion_mnist.cpp
const DataSourceEntry& cifar10_source();        // sources/cifar10.cpp
const DataSourceEntry& tensors_source();        // sources/tensors.cpp
const DataSourceEntry& text_source();           // sources/text.cpp
const DataSourceEntry& tokens_source();         // sources/tokens.cpp

std::span<const DataSourceEntry* const> data_source_entries() {
  static const std::vector<const DataSourceEntry*> table{&synthetic_source(), &libsvm_source(), &fashion_mnist_source(),
                                                         &cifar10_source(), &tensors_source(),
                                                         &text_source(),    &tokens_source()};
  return table;
}

std::int64_t DataShape::sample_elements() const {
  std::int64_t n = 1;
  for (auto d : sample) n *= d;
  return n;
}

const DataSourceEntry* find_data_source(std::string_view name) {
  for (const auto* entry : data_source_entries())
    if (entry->name == name) return entry;
  return nullptr;
}

std::vector<std::string> sources_yielding(SampleKind kind, const std::string& default_source) {
  if (data_source_entry(default_source).yields != kind)
    throw std::logic_error(fmt::format("data source {} yields another kind of samples", default_source));
  std::vector<std::string> names{default_source};
  for (const auto* e : data_source_entries())
    if (e->yields == kind && e->name != default_source) names.push_back(e->name);
  return names;
}

std::vector<std::string> data_source_names() {
  std::vector<std::string> names;
  for (const auto* entry : data_source_entries()) names.push_back(entry->name);
  return names;
}

const DataSourceEntry& data_source_entry(const std::string& name) {
  const auto* entry = find_data_source(name);
  if (!entry)
    throw std::logic_error(
        fmt::format("data source '{}' is none of {} (the loader refuses it)", name, fmt::join(data_source_names(), ", ")));
  return *entry;
}

namespace {
bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}
}  // namespace

std::vector<std::string> data_path_fields() {
  std::vector<std::string> fields;
  for (const auto* entry : data_source_entries())
    for (const auto& f : entry->path_fields)
      if (!contains(fields, f)) fields.push_back(f);
  return fields;
}

std::vector<std::string> with_data_fields(std::vector<std::string> own, const std::vector<std::string>& sources) {
  own.push_back("data");
  for (const auto& name : sources)
    for (const auto& f : data_source_entry(name).fields)
      if (!contains(own, f)) own.push_back(f);
  return own;
}

DataSpec parse_data_fields(config::ObjectReader& w, const std::vector<std::string>& sources, const std::string& type,
                           const WorkloadContext& ctx) {
  DataSpec spec;
  // Looks, not reads (the choice below reads "data"; the chosen source its fields).
  if (const auto data = w.value().find("data"); data != w.value().end() && data->is_string() && find_data_source(data->get<std::string>()) &&
                                         !contains(sources, data->get<std::string>()))
    throw config::ScenarioError(w.where("data"), config::ErrorKind::unknown_name,
                                fmt::format("workload type {} trains on {}, not {}", type, fmt::join(sources, " or "),
                                            data->get<std::string>()));
  std::string fallback = sources.front();
  for (const auto& name : sources)
    if (const auto& by = data_source_entry(name).selected_by; !by.empty() && w.value().contains(by)) {
      fallback = name;
      break;
    }
  spec.source = w.choice("data", fallback, sources, config::ObjectReader::Fallback::derived);
  if (auto* recorder = w.recorder()) {  // each source owns its fields, whether its parse gets to them or not
    std::map<std::string, std::vector<std::string>> owned;
    for (const auto& name : sources) owned[name] = data_source_entry(name).fields;
    recorder->own_fields("data", std::move(owned));
  }
  const auto& source = data_source_entry(spec.source);
  source.parse(w, spec, ctx);
  // A field another accepted source reads: the scenario mixes two sources.
  for (const auto& name : sources) {
    if (name == spec.source) continue;
    for (const auto& f : data_source_entry(name).fields)
      if (!contains(source.fields, f) && w.value().contains(f))
        throw config::ScenarioError(w.where(f), config::ErrorKind::unknown_field,
                                    fmt::format("a field of data {}, not of data {} (its fields: {})", name, spec.source,
                                                fmt::join(source.fields, ", ")));
  }
  return spec;
}

ImageFiles parse_image_files(config::ObjectReader& w, const WorkloadContext& ctx, const std::string& default_dir) {
  ImageFiles files;
  files.data_dir = default_dir.empty() ? w.string("data_dir", std::nullopt) : w.string("data_dir", default_dir);
  if (files.data_dir.empty())
    throw config::ScenarioError(w.where("data_dir"), config::ErrorKind::out_of_range, "expected a non-empty directory path");
  files.train_samples = w.integer("train_samples", files.train_samples, 0, config::kIntMax);
  files.test_samples = w.integer("test_samples", files.test_samples, 0, config::kIntMax);
  if (files.train_samples != 0 && files.train_samples < ctx.ranks)
    throw config::ScenarioError(w.where("train_samples"), config::ErrorKind::inconsistent,
                                fmt::format("expected 0 (all) or at least one sample per rank ({}), got {}", ctx.ranks,
                                            files.train_samples));
  return files;
}

void image_files_json(const ImageFiles& files, nlohmann::json& out) {
  out["data_dir"] = files.data_dir;
  out["train_samples"] = files.train_samples;
  out["test_samples"] = files.test_samples;
}

void data_fields_json(const DataSpec& spec, nlohmann::json& out) {
  out["data"] = spec.source;
  data_source_entry(spec.source).to_json(spec, out);
}

std::shared_ptr<const LabelledData> load_data_source(const DataSpec& spec, std::uint64_t seed) {
  const auto& source = data_source_entry(spec.source);
  auto data = source.load(spec, seed);
  // The models were built for the sample shape the source declares (the counts may be
  // fewer than declared: a file can hold fewer samples than the set it is named after).
  const auto shape = source.shape(spec);
  std::vector<std::int64_t> sample(data->train_x.sizes().begin() + 1, data->train_x.sizes().end());
  if (sample != shape.sample || data->train_y.size(0) != data->train_x.size(0))
    throw std::logic_error(fmt::format("data source {}: loaded {} samples of {} with {} labels, its shape says samples of {}",
                                       spec.source, data->train_x.size(0), fmt::join(sample, " x "), data->train_y.size(0),
                                       fmt::join(shape.sample, " x ")));
  return data;
}

}  // namespace dtsim::workloads
