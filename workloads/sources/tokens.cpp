// Data source "tokens": token sequences a user saved from Python, torch.save({"x": X, "y": Y})
// with X the input tokens and Y the targets, int64 [N, T] (workloads/text_data.hpp's reader,
// with tensor_file.hpp's checks). The parse reads the file once, for the counts, the row
// length and the vocabulary the workload checks.
#include <fmt/format.h>

#include "workloads/data_source.hpp"
#include "workloads/sources/tokens.hpp"
#include "workloads/text_data.hpp"

namespace dtsim::workloads {

namespace {

using config::ErrorKind;
using config::ScenarioError;

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  TokensSettings set;
  set.path = w.string("tokens_file", std::nullopt);
  if (set.path.empty())
    throw ScenarioError(w.where("tokens_file"), ErrorKind::out_of_range, "expected a non-empty path");
  std::shared_ptr<const LabelledData> data;
  try {
    data = read_token_file(set.path);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(w.where("tokens_file"), ErrorKind::bad_file, e.what());
  }
  set.read = {.train = data->train_x.size(0),
              .test = data->has_test() ? data->test_x.size(0) : 0,
              .sample = {data->train_x.size(1)},
              .classes = data->classes};
  if (set.read.train < ctx.ranks)
    throw ScenarioError(w.where("tokens_file"), ErrorKind::inconsistent,
                        fmt::format("expected at least one row per rank ({}), got {}", ctx.ranks, set.read.train));
  spec.settings = set;
}

void to_json(const DataSpec& spec, nlohmann::json& out) { out["tokens_file"] = data_settings<TokensSettings>(spec).path; }

DataShape shape(const DataSpec& spec) {
  DataShape s = data_settings<TokensSettings>(spec).read;
  s.file_bytes = 2.0 * static_cast<double>(s.train + s.test) * static_cast<double>(s.sample_elements()) * 8;
  return s;
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t) {
  return read_token_file(data_settings<TokensSettings>(spec).path);
}

}  // namespace

const DataSourceEntry& tokens_source() {
  static const DataSourceEntry entry{
      .name = "tokens",
      .yields = SampleKind::token_windows,
      .description = "a torch.save({\"x\": X, \"y\": Y}) file of int64 [N, T] input tokens and next-token targets "
                     "(optional test_x, test_y)",
      .fields = {"tokens_file"},
      .selected_by = "tokens_file",
      .path_fields = {"tokens_file"},
      .data_path = "/workload/tokens_file",
      .parse = parse,
      .to_json = to_json,
      .shape = shape,
      .load = load};
  return entry;
}

}  // namespace dtsim::workloads
