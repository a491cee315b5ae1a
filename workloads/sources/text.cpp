// Data source "text": any text file or folder as bytes (workloads/text_data.hpp's reader),
// Debian's fortunes package by default (/usr/share/games/fortunes, about 2.5 MB of English).
// The last `holdout` of every file is held out. The parse lists and reads the files once, for
// the counts the workload's checks and the estimate need.
#include <fmt/format.h>

#include "workloads/data_source.hpp"
#include "workloads/sources/text.hpp"
#include "workloads/text_data.hpp"

namespace dtsim::workloads {

namespace {

using config::ErrorKind;
using config::ScenarioError;

void parse(config::ObjectReader& w, DataSpec& spec, const WorkloadContext& ctx) {
  TextSettings set;
  set.text_path = w.string("text_path", set.text_path);
  if (set.text_path.empty())
    throw ScenarioError(w.where("text_path"), ErrorKind::out_of_range, "expected a non-empty path");
  set.holdout = w.number_below("holdout", set.holdout, 0.0, 1.0);
  TextFiles files;
  try {
    files = list_text_files(set.text_path, set.holdout);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(w.where("text_path"), ErrorKind::bad_file, e.what());
  }
  set.read = {.train = files.train_bytes - 1,  // positions with a next byte
              .test = files.test_bytes >= 2 ? files.test_bytes - 1 : 0,
              .sample = {},
              .classes = 256};
  if (set.read.train < ctx.ranks)
    throw ScenarioError(w.where("text_path"), ErrorKind::inconsistent,
                        fmt::format("expected at least one byte of training text per rank ({}), got {}", ctx.ranks,
                                    set.read.train));
  spec.settings = set;
}

void to_json(const DataSpec& spec, nlohmann::json& out) {
  const auto& set = data_settings<TextSettings>(spec);
  out["text_path"] = set.text_path;
  out["holdout"] = set.holdout;
}

DataShape shape(const DataSpec& spec) {
  DataShape s = data_settings<TextSettings>(spec).read;
  // The files' bytes while they are read, besides the one buffer of the streams.
  s.file_bytes = static_cast<double>(s.train + s.test + 2);
  return s;
}

std::shared_ptr<const LabelledData> load(const DataSpec& spec, std::uint64_t) {
  const auto& set = data_settings<TextSettings>(spec);
  return read_text_corpus(set.text_path, set.holdout);
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
