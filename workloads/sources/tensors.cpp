// Data source "tensors": any labelled data set a user can load in Python, saved with
// torch.save({"x": X, "y": Y}) (workloads/tensor_file.hpp's reader). The parse reads the
// file once, for the counts, sample shape and classes the models and the estimate need.
#include <fmt/format.h>

#include "config/json_input.hpp"
#include "workloads/data_source.hpp"
#include "workloads/sources/tensors.hpp"
#include "workloads/tensor_file.hpp"

namespace dtsim::workloads {

namespace {

using config::ErrorKind;
using config::ScenarioError;

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  TensorsSettings set;
  set.path = w.string("tensors_file", std::nullopt);
  if (set.path.empty())
    throw ScenarioError(w.where("tensors_file"), ErrorKind::out_of_range, "expected a non-empty path");
  std::shared_ptr<const LabelledData> data;
  try {
    data = read_tensor_file(set.path);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(w.where("tensors_file"), ErrorKind::bad_file, e.what());
  }
  set.read = {.train = data->train_x.size(0),
              .test = data->has_test() ? data->test_x.size(0) : 0,
              .sample = {data->train_x.sizes().begin() + 1, data->train_x.sizes().end()},
              .classes = data->classes};
  if (set.read.train < ctx.ranks)
    throw ScenarioError(w.where("tensors_file"), ErrorKind::inconsistent,
                        fmt::format("expected at least one sample per rank ({}), got {}", ctx.ranks, set.read.train));
  spec.settings = set;
}

void to_json(const DataSpec& spec, nlohmann::json& out) {
  out["tensors_file"] = data_settings<TensorsSettings>(spec).path;
}

DataShape shape(const DataSpec& spec) {
  DataShape s = data_settings<TensorsSettings>(spec).read;
  // The file's bytes while it is unpickled (about the tensors' own size).
  s.file_bytes = static_cast<double>(s.train + s.test) * static_cast<double>(s.sample_elements()) * 4;
  return s;
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t) {
  return read_tensor_file(data_settings<TensorsSettings>(spec).path);
}

}  // namespace

const DataSourceEntry& tensors_source() {
  static const DataSourceEntry entry{
      .name = "tensors",
      .yields = SampleKind::labelled_samples,
      .description = "a torch.save({\"x\": X, \"y\": Y}) file (any labelled set saved from Python; optional test_x, test_y)",
      .fields = {"tensors_file"},
      .selected_by = "tensors_file",
      .path_fields = {"tensors_file"},
      .data_path = "/workload/tensors_file",
      .parse = parse,
      .to_json = to_json,
      .shape = shape,
      .load = load};
  return entry;
}

}  // namespace dtsim::workloads
