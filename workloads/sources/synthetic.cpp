// Data source "synthetic": the seeded binary classification set of the logistic
// regression experiments. x ~ N(0, I_d); a hidden w* ~ N(0, 9 I_d / d) (so |x.w*| is
// about 3) and b* = 0.1; labels y ~ Bernoulli(sigmoid(x.w* + b*)). With unit_norm, each
// x is then divided by its L2 norm (the labels stay: the same classes, epsilon-like unit
// rows, so that a step of lr moves a logit by at most lr). Every process generates the
// same set from the seed, so emulated and live runs see identical data.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include <fmt/format.h>

#include "workloads/data_source.hpp"
#include "workloads/sources/synthetic.hpp"

namespace dtsim::workloads {

namespace {

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  SyntheticSettings set;
  set.samples = w.integer("samples", set.samples, 1, config::kIntMax);
  set.features = w.integer("features", set.features, 1, config::kIntMax);
  set.unit_norm = w.boolean("unit_norm", set.unit_norm);
  if (set.samples < ctx.ranks)
    throw config::ScenarioError(w.where("samples"), config::ErrorKind::inconsistent,
                                fmt::format("expected at least one sample per rank ({}), got {}", ctx.ranks, set.samples));
  spec.settings = set;
}

void to_json(const DataSpec& spec, nlohmann::json& out) {
  const auto& set = data_settings<SyntheticSettings>(spec);
  out["samples"] = set.samples;
  out["features"] = set.features;
  out["unit_norm"] = set.unit_norm;
}

DataShape shape(const DataSpec& spec) {
  const auto& set = data_settings<SyntheticSettings>(spec);
  return {.train = set.samples, .sample = {set.features}, .classes = 2};
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t seed) {
  const auto& set = data_settings<SyntheticSettings>(spec);
  auto gen = at::detail::createCPUGenerator(seed);
  auto data = std::make_shared<LabelledData>();
  const double d = static_cast<double>(set.features);
  data->train_x = at::randn({set.samples, set.features}, gen, at::kFloat);
  auto w_star = at::randn({set.features}, gen, at::kFloat) * (3.0 / std::sqrt(d));
  auto p = at::sigmoid(at::mv(data->train_x, w_star) + 0.1);
  data->train_y = at::bernoulli(p, gen).to(at::kLong);
  if (set.unit_norm) data->train_x.div_(data->train_x.norm(2, {1}, true));
  data->classes = 2;
  return data;
}

}  // namespace

const DataSourceEntry& synthetic_source() {
  static const DataSourceEntry entry{
      .name = "synthetic",
      .yields = SampleKind::binary_vectors,
      .description = "seeded binary classification, x ~ N(0, I), y ~ Bernoulli(sigmoid(x.w* + 0.1))",
      .fields = {"samples", "features", "unit_norm"},
      .selected_by = "",
      .path_fields = {},
      .data_path = "/workload",
      .parse = parse,
      .to_json = to_json,
      .shape = shape,
      .load = load};
  return entry;
}

}  // namespace dtsim::workloads
