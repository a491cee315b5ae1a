// Data source "libsvm": a LIBSVM text file (workloads/logistic_regression.hpp's reader:
// labels +1 / 1 -> class 1, -1 / 0 -> class 0; dense fp32 features), e.g. the epsilon
// set of the CHOCO-SGD convex experiments. The parse reads the file once for its shape
// (every check of the loader, no data built); samples is the file's.
#include <fmt/format.h>

#include "config/json_input.hpp"
#include "workloads/data_source.hpp"
#include "workloads/logistic_regression.hpp"
#include "workloads/sources/libsvm.hpp"

namespace dtsim::workloads {

namespace {

using config::ErrorKind;
using config::ScenarioError;

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  LibsvmSettings set;
  const auto* file = w.find("libsvm_file");
  if (!file)
    throw ScenarioError(w.where("libsvm_file"), ErrorKind::missing_field, "expected the LIBSVM file of data libsvm");
  if (!file->is_string() || file->get<std::string>().empty())
    throw ScenarioError(w.where("libsvm_file"), ErrorKind::wrong_type,
                        "expected a non-empty path string, got " + config::describe(*file));
  if (w.value().contains("samples"))
    throw ScenarioError(w.where("samples"), ErrorKind::inconsistent,
                        "expected no samples with libsvm_file (the file's lines are the samples)");
  set.libsvm_file = file->get<std::string>();
  if (const auto why = config::not_a_regular_file(set.libsvm_file))
    throw ScenarioError(w.where("libsvm_file"), ErrorKind::bad_file,
                        fmt::format("{} {}", config::one_line(set.libsvm_file), *why));
  set.features = w.integer("features", 0, 1, config::kIntMax);
  try {  // the file's shape, without building its (dense) data
    const auto shape = libsvm_shape(set.libsvm_file, set.features);
    set.samples = shape.samples;
    set.features = shape.features;
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(w.where("libsvm_file"), ErrorKind::bad_file, e.what());
  }
  if (set.samples < ctx.ranks)
    throw ScenarioError(w.where("libsvm_file"), ErrorKind::inconsistent,
                        fmt::format("expected at least one sample per rank ({}), got {}", ctx.ranks, set.samples));
  spec.settings = set;
}

void to_json(const DataSpec& spec, nlohmann::json& out) {
  const auto& set = data_settings<LibsvmSettings>(spec);
  out["libsvm_file"] = set.libsvm_file;  // the sample count is the file's (and not a field)
  out["features"] = set.features;
}

DataShape shape(const DataSpec& spec) {
  const auto& set = data_settings<LibsvmSettings>(spec);
  return {.train = set.samples, .sample = {set.features}, .classes = 2};
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t) {
  const auto& set = data_settings<LibsvmSettings>(spec);
  const auto file = load_libsvm(set.libsvm_file, set.features);
  auto data = std::make_shared<LabelledData>();
  data->train_x = file->x;
  data->train_y = file->y.to(at::kLong);
  data->classes = 2;
  return data;
}

}  // namespace

const DataSourceEntry& libsvm_source() {
  static const DataSourceEntry entry{.name = "libsvm",
                                     .yields = SampleKind::binary_vectors,
                                     .description = "a LIBSVM text file (binary labels, dense features), e.g. epsilon",
                                     .fields = {"libsvm_file", "features"},
                                     .selected_by = "libsvm_file",
                                     .path_fields = {"libsvm_file"},
                                     .data_path = "/workload/libsvm_file",
                                     .parse = parse,
                                     .to_json = to_json,
                                     .shape = shape,
                                     .load = load};
  return entry;
}

}  // namespace dtsim::workloads
