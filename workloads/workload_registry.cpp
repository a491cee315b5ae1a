#include "workloads/workload_registry.hpp"

#include "workloads/shape_models.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::workloads {

// Each entry is defined next to its workload (the file named on its line).
const WorkloadEntry& logistic_regression_entry();  // logistic_regression.cpp
const WorkloadEntry& mlp_entry();                  // image_models.cpp
const WorkloadEntry& cnn_entry();                  // image_models.cpp
const WorkloadEntry& resnet20_real_entry();        // resnet20_model.cpp
const WorkloadEntry& vgg11_real_entry();           // vgg11_model.cpp
const WorkloadEntry& torchscript_entry();          // torchscript_model.cpp
const WorkloadEntry& gpt_entry();                  // gpt_workload.cpp

std::span<const WorkloadEntry* const> workload_entries() {
  static const std::vector<const WorkloadEntry*> table = [] {
    std::vector<const WorkloadEntry*> t{&logistic_regression_entry(), &mlp_entry(), &cnn_entry()};
    for (const auto* shape_only : shape_workload_entries()) t.push_back(shape_only);  // shape_models.cpp's table
    for (const auto* e : {&resnet20_real_entry(), &vgg11_real_entry(), &torchscript_entry(), &gpt_entry()}) t.push_back(e);
    return t;
  }();
  return table;
}

const WorkloadEntry* find_workload(std::string_view type) {
  for (const auto* entry : workload_entries())
    if (entry->name == type) return entry;
  return nullptr;
}

const std::vector<std::string>& workload_types() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto* entry : workload_entries()) v.push_back(entry->name);
    return v;
  }();
  return names;
}

const WorkloadEntry& workload_entry(const std::string& type) {
  const auto* entry = find_workload(type);
  if (!entry)
    throw std::logic_error(fmt::format("workload type '{}' is none of {} (the loader refuses it)", type,
                                       fmt::join(workload_types(), ", ")));
  return *entry;
}

WorkloadSpec parse_workload_section(config::ObjectReader& w, const WorkloadContext& ctx) {
  WorkloadSpec spec;
  // "type" (default logistic_regression); "kind" is its older name.
  const bool kind = w.value().contains("kind");
  if (kind && w.value().contains("type"))
    throw config::ScenarioError(w.where("kind"), config::ErrorKind::inconsistent,
                                "expected type or kind, not both (kind is the older name of type)");
  spec.type = w.choice(kind ? "kind" : "type", "logistic_regression", workload_types());
  const auto& entry = workload_entry(spec.type);
  const std::vector<std::string> except{"type", "kind"};
  w.only_fields(entry.fields, except, "workload type " + spec.type);
  if (!entry.data_sources.empty()) spec.data = parse_data_fields(w, entry.data_sources, spec.type, ctx);
  entry.parse(w, spec, ctx);
  w.finish();
  return spec;
}

nlohmann::json workload_section_json(const WorkloadSpec& spec) {
  nlohmann::json out = {{"type", spec.type}};
  const auto& entry = workload_entry(spec.type);
  if (!entry.data_sources.empty()) data_fields_json(workload_data(spec), out);
  entry.to_json(spec, out);
  return out;
}

std::vector<std::string> path_fields() {
  auto fields = data_path_fields();
  for (const auto* entry : workload_entries())
    for (const auto& f : entry->path_fields)
      if (std::find(fields.begin(), fields.end(), f) == fields.end()) fields.push_back(f);
  return fields;
}

DataSpec workload_data(const WorkloadSpec& spec) {
  DataSpec data = spec.data;
  const auto& entry = workload_entry(spec.type);
  if (data.source.empty() && !entry.data_sources.empty()) data.source = entry.data_sources.front();
  return data;
}

std::string workload_data_path(const WorkloadSpec& spec) {
  const auto& entry = workload_entry(spec.type);
  return entry.data_sources.empty() ? entry.data_path : data_source_entry(workload_data(spec).source).data_path;
}

std::shared_ptr<const WorkloadData> load_workload_data(const WorkloadSpec& spec, std::uint64_t seed) {
  if (spec.device.is_cuda()) {
    // fp32 on the GPU means fp32: LibTorch lets cuDNN convolutions (and, before 1.12,
    // cuBLAS matmuls) round their inputs to TF32 (2^-11) by default, which would put the
    // CNN's GPU run a thousand times further from the CPU run than rounding order does.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  return workload_entry(spec.type).load_data(spec, seed);
}

std::unique_ptr<Workload> make_workload(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data,
                                        std::uint64_t seed, int rank, int ranks) {
  return workload_entry(spec.type).make(spec, std::move(data), seed, rank, ranks);
}

}  // namespace dtsim::workloads
