// Data source "text": any text file or folder as bytes (workloads/text_data.hpp's reader),
// Debian's fortunes package by default (/usr/share/games/fortunes, about 2.5 MB of English).
// The last `holdout` of every file is held out. The parse lists and reads the files once, for
// the counts the workload's checks and the estimate need.
#include <fmt/format.h>

#include "workloads/data_source.hpp"
#include "workloads/text_data.hpp"

namespace dtsim::workloads {

namespace {

using config::ErrorKind;
using config::ScenarioError;

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  spec.text.text_path = w.string("text_path", spec.text.text_path);
  if (spec.text.text_path.empty())
    throw ScenarioError(w.where("text_path"), ErrorKind::out_of_range, "expected a non-empty path");
  spec.text.holdout = w.number("holdout", 0.1, 0.0, 1.0);
  if (spec.text.holdout >= 1.0)
    throw ScenarioError(w.where("holdout"), ErrorKind::out_of_range, "expected a fraction in [0, 1), got 1");
  TextFiles files;
  try {
    files = list_text_files(spec.text.text_path, spec.text.holdout);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(w.where("text_path"), ErrorKind::bad_file, e.what());
  }
  spec.samples = files.train_bytes - 1;  // positions with a next byte
  spec.test_samples = files.test_bytes >= 2 ? files.test_bytes - 1 : 0;
  spec.sample_shape = {};
  spec.classes = 256;
  if (spec.samples < ctx.ranks)
    throw ScenarioError(w.where("text_path"), ErrorKind::inconsistent,
                        fmt::format("expected at least one byte of training text per rank ({}), got {}", ctx.ranks,
                                    spec.samples));
}

void to_json(const DataSpec& spec, nlohmann::json& out) {
  out["text_path"] = spec.text.text_path;
  out["holdout"] = spec.text.holdout;
}

DataShape shape(const DataSpec& spec) {
  // The files' bytes while they are read, besides the one buffer of the streams.
  return {.train = spec.samples, .test = spec.test_samples, .sample = {}, .classes = 256,
          .file_bytes = static_cast<double>(spec.samples + spec.test_samples + 2)};
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t) {
  return read_text_corpus(spec.text.text_path, spec.text.holdout);
}

}  // namespace

const DataSourceEntry& text_source() {
  static const DataSourceEntry entry{
      .name = "text",
      .yields = SampleKind::token_windows,
      .description = "a text file or folder read as bytes (256 tokens), the last holdout of every file held out "
                     "(Debian's fortunes by default)",
      .fields = {"text_path", "holdout"},
      .selected_by = "text_path",
      .path_fields = {"text_path"},
      .data_path = "/workload/text_path",
      .parse = parse,
      .to_json = to_json,
      .shape = shape,
      .load = load};
  return entry;
}

}  // namespace dtsim::workloads
