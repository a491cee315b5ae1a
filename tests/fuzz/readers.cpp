#include "tests/fuzz/readers.hpp"

#include <cxxabi.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <typeinfo>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/pickle.h>

#include "calibration/calibration.hpp"
#include "config/scenario_error.hpp"
#include "cli/collective_command.hpp"
#include "comm/op_trace.hpp"
#include "network_models/nccl/presets.hpp"
#include "network_models/nccl/system.hpp"
#include "runner/collective_table.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "sweep/sweep.hpp"
#include "workloads/cifar10.hpp"
#include "workloads/idx_reader.hpp"
#include "workloads/tensor_file.hpp"
#include "workloads/logistic_regression.hpp"

namespace dtsim::fuzz {

namespace fs = std::filesystem;
using nlohmann::json;

std::string name_of(Reader reader) {
  switch (reader) {
    case Reader::scenario: return "scenario";
    case Reader::sweep: return "sweep";
    case Reader::op_trace: return "op_trace";
    case Reader::network_model: return "network_model";
    case Reader::libsvm: return "libsvm";
    case Reader::idx: return "idx";
    case Reader::cifar10: return "cifar10";
    case Reader::tensors: return "tensors";
    case Reader::collective_flags: return "collective_flags";
    case Reader::nccl_system: return "nccl_system";
  }
  return "?";
}

std::string source_dir() {
#ifdef DTSIM_SOURCE_DIR
  return DTSIM_SOURCE_DIR;
#else
  return ".";
#endif
}

std::string printable(std::string_view input, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < input.size() && out.size() < limit; ++i) {
    const auto c = static_cast<unsigned char>(input[i]);
    if (c == '\\') out += "\\\\";
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else out += fmt::format("\\x{:02x}", c);
  }
  if (out.size() >= limit) out += fmt::format("... ({} bytes)", input.size());
  return out;
}

namespace {

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& file, std::string_view bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("fuzz: cannot write " + file.string());
}

std::string type_name(const std::exception& e) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : typeid(e).name();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

bool is_one_line(const std::string& s) { return s.find('\n') == std::string::npos && s.find('\r') == std::string::npos; }

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The result of one reader call, and the first broken promise of all the calls for an input.
struct Outcome {
  Verdict verdict;
  void accepted() {}
  void rejected(const std::string& message) {
    if (verdict.kind == Verdict::Kind::accepted) verdict.kind = Verdict::Kind::rejected;
    if (verdict.message.empty()) verdict.message = message;
  }
  void broken(const std::string& what) {
    if (verdict.violation.empty()) verdict.violation = what;
  }
};

// A rejection of the documented type: one line, starting with `prefix` (or one of them).
void check_message(Outcome& out, const std::string& reader, const std::string& message,
                   const std::vector<std::string>& prefixes) {
  out.rejected(message);
  if (!is_one_line(message)) out.broken(fmt::format("{}: message on more than one line: {}", reader, printable(message)));
  if (std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return starts_with(message, p); }))
    out.broken(fmt::format("{}: message does not start with {}: {}", reader, prefixes.front(), printable(message)));
}

void foreign(Outcome& out, const std::string& reader, const std::exception& e) {
  out.broken(fmt::format("{}: threw {} (not its documented type): {}", reader, type_name(e), printable(first_line(e.what()))));
}

// --- what a parse would build --------------------------------------------------------------

// Valid values for which the parse itself (which builds the topology) takes long or much
// memory. Measured in the release build (tests/fuzz/README.md): a complete graph of 4096
// ranks 11 s and 1.2 GB, a hypercube of 2^20 ranks 20 s, a 256-ary fat-tree 5 s,
// hierarchical:65536:direct 73 s and 13 GB. Limits on those are not this test's business;
// such inputs are skipped. Conservative: a dense kind named anywhere counts.
struct Size {
  std::uint64_t ranks = 0, k = 0, nodes = 0, array = 0;
  bool dense = false;  // a kind whose links grow faster than the ranks
};

std::uint64_t integer_or_zero(const json& x) {
  if (x.is_number_unsigned()) return x.get<std::uint64_t>();
  if (x.is_number_integer()) return static_cast<std::uint64_t>(std::max<std::int64_t>(0, x.get<std::int64_t>()));
  return 0;
}

void note(Size& size, const std::string& key, const json& v) {
  if (key == "ranks") size.ranks = std::max(size.ranks, integer_or_zero(v));
  if (key == "k") size.k = std::max(size.k, integer_or_zero(v));
  if (key == "nodes") size.nodes = std::max(size.nodes, integer_or_zero(v));
  if (key == "gpus_per_node") size.dense = true;
  if (v.is_array()) size.array = std::max<std::uint64_t>(size.array, v.size());
}

std::optional<std::string> too_big_to_parse(const json& doc, bool sweep) {
  static const bool never = std::getenv("DTSIM_FUZZ_NO_SKIP") != nullptr;  // to measure what a skip avoids
  if (never) return std::nullopt;
  static const std::set<std::string> dense_kinds{"complete", "hierarchical", "exponential", "hypercube"};
  Size size;
  std::vector<const json*> stack{&doc};
  while (!stack.empty()) {
    const json* v = stack.back();
    stack.pop_back();
    if (v->is_string() && dense_kinds.count(v->get<std::string>())) size.dense = true;
    if (v->is_object()) {
      for (auto it = v->begin(); it != v->end(); ++it) {
        note(size, it.key(), *it);
        stack.push_back(&*it);
      }
      // A sweep axis {"path": ".../ranks", "values": [...]}: each value lands at the path.
      auto path = v->find("path");
      auto values = v->find("values");
      if (path != v->end() && path->is_string() && values != v->end() && values->is_array()) {
        const std::string p = path->get<std::string>();
        for (const auto& x : *values) note(size, p.substr(p.rfind('/') + 1), x);
      }
    } else if (v->is_array()) {
      for (const auto& x : *v) stack.push_back(&x);
    }
  }
  if (size.ranks > 16384 || (size.dense && size.ranks > 512)) return fmt::format("{} ranks: valid but huge", size.ranks);
  if (size.k > 32) return fmt::format("a {}-ary fat-tree: valid but huge", size.k);
  if (size.nodes > (1 << 20)) return fmt::format("{} nodes: valid but huge", size.nodes);
  if (size.array > 2000) return fmt::format("an array of {} values", size.array);
  if (sweep && doc.is_object() && doc.contains("axes") && doc["axes"].is_array()) {
    // Every point is parsed: a product of axes with thousands of points is slow, not wrong.
    double points = 1;
    for (const auto& a : doc["axes"])
      if (a.is_object() && a.contains("values") && a["values"].is_array()) points *= std::max<double>(1, a["values"].size());
    if (points > 256) return fmt::format("a sweep of {} points", points);
  }
  return std::nullopt;
}

// --- the readers -----------------------------------------------------------------------------

void scenario_file(Outcome& out, const fs::path& file) {
  try {
    (void)runner::load_scenario(file);
    out.accepted();
  } catch (const runner::ScenarioError& e) {
    const std::string m = e.what();
    check_message(out, "load_scenario", m, {"/"});
    if (m.find("passes the loader but not") != std::string::npos)
      out.broken("load_scenario: the loader and scenarios/scenario.schema.json disagree: " + printable(m));
  } catch (const std::exception& e) {
    foreign(out, "load_scenario", e);
  }
}

Verdict check_scenario(std::string_view input, bool skip_huge) {
  Outcome out;
  const json doc = json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (skip_huge && !doc.is_discarded())
    if (auto why = too_big_to_parse(doc, false)) return {Verdict::Kind::skipped, "", *why};
  const fs::path file = fs::path(workspace()) / "scenario.json";
  write_bytes(file, input);
  scenario_file(out, file);
  return out.verdict;
}

Verdict check_sweep(std::string_view input, bool skip_huge) {
  Outcome out;
  const json doc = json::parse(input, nullptr, false);
  if (skip_huge && !doc.is_discarded())
    if (auto why = too_big_to_parse(doc, true)) return {Verdict::Kind::skipped, "", *why};
  const fs::path file = fs::path(workspace()) / "sweeps" / "fuzz.json";
  write_bytes(file, input);
  try {
    (void)sweep::load_sweep(file);
    out.accepted();
  } catch (const sweep::SweepError& e) {
    const std::string m = e.what();
    check_message(out, "load_sweep", m,
                  {"sweep: ", "sweep file " + file.string() + ": ", "axis ", "base scenario", "inline base scenario: /",
                   "point ", "points ", "cannot read base scenario "});
    if (m.find("passes the loader but not") != std::string::npos)
      out.broken("load_sweep: the loader and scenarios/scenario.schema.json disagree: " + printable(m));
  } catch (const std::exception& e) {
    foreign(out, "load_sweep", e);
  }
  return out.verdict;
}

Verdict check_op_trace(std::string_view input) {
  Outcome out;
  const std::vector<std::uint8_t> bytes(input.begin(), input.end());
  bool direct = false;
  try {
    (void)comm::op_trace_from_bytes(bytes);
    direct = true;
  } catch (const config::InputError& e) {
    check_message(out, "op_trace_from_bytes", e.what(), {"not an operation trace: "});
  } catch (const std::exception& e) {
    foreign(out, "op_trace_from_bytes", e);
  }
  // The same bytes as a `--record-trace` file.
  const fs::path dir = fs::path(workspace()) / "traces";
  const fs::path file = dir / "rank0.trace";
  write_bytes(file, input);
  try {
    (void)runner::read_traces(dir, 1);
    if (!direct) out.broken("read_traces accepts what op_trace_from_bytes refuses");
  } catch (const config::InputError& e) {
    check_message(out, "read_traces", e.what(), {file.string() + ": "});
    if (direct) out.broken("read_traces refuses what op_trace_from_bytes accepts: " + printable(e.what()));
  } catch (const std::exception& e) {
    foreign(out, "read_traces", e);
  }
  return out.verdict;
}

Verdict check_network_model(std::string_view input) {
  Outcome out;
  const fs::path dir = fs::path(workspace()) / "model";
  const fs::path file = dir / "m.json";
  write_bytes(file, input);
  try {
    (void)calibration::load_model(file);
    out.accepted();
  } catch (const config::InputError& e) {
    check_message(out, "load_model", e.what(), {file.string() + ": "});
  } catch (const std::exception& e) {
    foreign(out, "load_model", e);
  }
  // The same file behind a scenario's "network": {"calibrated": "m.json"}.
  scenario_file(out, dir / "uses.json");
  return out.verdict;
}

std::string scenario_using(const json& workload, const json& network);

// A system JSON file for the nccl model (dtsim collective --system FILE), and the same JSON
// as a scenario's /network/system (4 ranks: one partial node, or a refusal naming
// /network/system when the system's nodes hold fewer GPUs): the same verdict on the
// system's content, with the file's name or the scenario's path in front.
Verdict check_nccl_system(std::string_view input) {
  Outcome out;
  const fs::path dir = fs::path(workspace()) / "system";
  const fs::path file = dir / "s.json";
  write_bytes(file, input);
  bool accepted = false;
  try {
    (void)net::nccl::read_system_file(file.string());
    accepted = true;
  } catch (const config::InputError& e) {
    check_message(out, "read_system_file", e.what(), {file.string() + ": ", file.string() + " "});
  } catch (const std::exception& e) {
    foreign(out, "read_system_file", e);
  }
  const json doc = json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || config::first_too_deep(doc)) return out.verdict;
  Outcome in_scenario;
  const fs::path scenario = dir / "uses.json";
  write_bytes(scenario, scenario_using({{"type", "logistic_regression"}, {"samples", 64}, {"features", 4}},
                                       {{"model", "nccl"}, {"system", doc}}));
  scenario_file(in_scenario, scenario);
  if (!in_scenario.verdict.violation.empty()) out.broken(in_scenario.verdict.violation);
  if (accepted && in_scenario.verdict.kind == Verdict::Kind::rejected &&
      in_scenario.verdict.message.rfind("/network/system: ", 0) != 0)
    out.broken("read_system_file accepts what the scenario refuses: " + printable(in_scenario.verdict.message));
  if (!accepted && in_scenario.verdict.kind == Verdict::Kind::accepted)
    out.broken("the scenario accepts what read_system_file refuses");
  return out.verdict;
}

// libsvm_shape and parse_libsvm on one text with one `features` argument: the same verdict.
void libsvm_with(Outcome& out, const std::string& text, const std::string& name, std::int64_t features) {
  std::optional<workloads::LibsvmShape> shape;
  std::string shape_error;
  try {
    std::istringstream in(text);
    shape = workloads::libsvm_shape(in, name, features);
  } catch (const std::invalid_argument& e) {
    shape_error = e.what();
    check_message(out, "libsvm_shape", e.what(), {name + ":"});
  } catch (const std::exception& e) {
    foreign(out, "libsvm_shape", e);
  }
  // The dense data only when it is small, or so large that parse_libsvm must refuse it
  // before allocating (over 1 TiB): a valid file may name feature 10^9.
  const double elements = shape ? static_cast<double>(shape->samples) * static_cast<double>(shape->features) : 0.0;
  if (elements > double(1 << 22) && elements * 4 <= 0x1p40) return;
  try {
    std::istringstream in(text);
    const auto data = workloads::parse_libsvm(in, name, features);
    if (!shape)
      out.broken("parse_libsvm accepts what libsvm_shape refuses: " + printable(shape_error));
    else if (data->x.size(0) != shape->samples || data->x.size(1) != shape->features)
      out.broken(fmt::format("parse_libsvm's data is {} x {}, libsvm_shape said {} x {}", data->x.size(0),
                             data->x.size(1), shape->samples, shape->features));
  } catch (const std::invalid_argument& e) {
    check_message(out, "parse_libsvm", e.what(), {name + ":"});
    if (shape && elements * 4 <= 0x1p40) out.broken("parse_libsvm refuses what libsvm_shape accepts: " + printable(e.what()));
    else if (!shape && shape_error != e.what())
      out.broken(fmt::format("parse_libsvm and libsvm_shape refuse differently: {} / {}", printable(e.what()),
                             printable(shape_error)));
  } catch (const std::exception& e) {
    foreign(out, "parse_libsvm", e);
  }
}

Verdict check_libsvm(std::string_view input) {
  Outcome out;
  const std::string text(input);
  // features 0 (the largest index), and 3 or 64 depending on the input (deterministically).
  libsvm_with(out, text, "fuzz.libsvm", 0);
  libsvm_with(out, text, "fuzz.libsvm", std::hash<std::string_view>{}(input) % 2 ? 3 : 64);
  // The same file as a scenario's /workload/libsvm_file.
  const fs::path dir = fs::path(workspace()) / "libsvm";
  write_bytes(dir / "d.libsvm", input);
  scenario_file(out, dir / "uses.json");
  return out.verdict;
}

void gzip_to(const fs::path& file, std::string_view bytes) {
  std::unique_ptr<std::remove_pointer_t<gzFile>, int (*)(gzFile)> f(gzopen(file.c_str(), "wb"), gzclose);
  if (!f || (!bytes.empty() && gzwrite(f.get(), bytes.data(), static_cast<unsigned>(bytes.size())) !=
                                   static_cast<int>(bytes.size())))
    throw std::runtime_error("fuzz: cannot write " + file.string());
}

Verdict check_idx(std::string_view input) {
  Outcome out;
  const fs::path dir = fs::path(workspace()) / "idx";
  auto read = [&](const fs::path& file, std::string& message) -> std::optional<at::Tensor> {
    try {
      return workloads::read_idx(file.string());
    } catch (const std::invalid_argument& e) {
      check_message(out, "read_idx", e.what(), {file.string() + ": "});
      message = std::string(e.what()).substr(file.string().size());
    } catch (const std::exception& e) {
      foreign(out, "read_idx", e);
    }
    return std::nullopt;
  };
  std::string plain_message;
  write_bytes(dir / "f.idx", input);
  const auto plain = read(dir / "f.idx", plain_message);
  // The same bytes gzip-compressed (unless they are gzip already) must read the same.
  if (input.size() < 2 || input[0] != '\x1f' || input[1] != '\x8b') {
    std::string gz_message;
    gzip_to(dir / "f.idx.gz", input);
    const auto gz = read(dir / "f.idx.gz", gz_message);
    if (plain.has_value() != gz.has_value() || (plain && !plain->equal(*gz)) || plain_message != gz_message)
      out.broken(fmt::format("read_idx reads the plain and the gzip-compressed file differently: {} / {}",
                             printable(plain_message), printable(gz_message)));
  }
  return out.verdict;
}

// One CIFAR-10 record: label, then 3,072 pixel bytes from `fill`.
std::string cifar_record(std::uint8_t label, std::uint8_t fill) {
  std::string r(static_cast<std::size_t>(workloads::Cifar10::kRecordBytes), static_cast<char>(fill));
  r[0] = static_cast<char>(label);
  for (std::size_t i = 1; i < r.size(); i += 97) r[i] = static_cast<char>(fill + i);  // not one flat colour
  return r;
}

// The input as data_batch_1.bin of a directory whose other five files hold one valid
// record each: accepted with input / 3,073 + 5 images, or refused naming a file of it.
Verdict check_cifar10(std::string_view input) {
  Outcome out;
  const fs::path dir = fs::path(workspace()) / "cifar10";
  if (!fs::exists(dir / "test_batch.bin")) {
    for (int f = 2; f <= 5; ++f) write_bytes(dir / fmt::format("data_batch_{}.bin", f), cifar_record(3, 10));
    write_bytes(dir / "test_batch.bin", cifar_record(7, 20));
  }
  write_bytes(dir / "data_batch_1.bin", input);
  try {
    const auto data = workloads::Cifar10::load(dir.string());
    const auto records = static_cast<std::int64_t>(input.size()) / workloads::Cifar10::kRecordBytes;
    if (data->train_x.size(0) != records + 4 || data->test_x.size(0) != 1)
      out.broken(fmt::format("Cifar10::load read {} training images from {} + 4 records", data->train_x.size(0), records));
  } catch (const std::invalid_argument& e) {
    check_message(out, "Cifar10::load", e.what(), {(dir / "data_batch_1.bin").string() + ": "});
  } catch (const std::exception& e) {
    foreign(out, "Cifar10::load", e);
  }
  return out.verdict;
}

// The input as a torch.save file (read_tensor_file, LibTorch's pickle_load underneath).
Verdict check_tensors(std::string_view input) {
  Outcome out;
  const fs::path file = fs::path(workspace()) / "tensors" / "d.pt";
  write_bytes(file, input);
  try {
    const auto data = workloads::read_tensor_file(file.string());
    if (data->train_x.size(0) != data->train_y.size(0))
      out.broken(fmt::format("read_tensor_file: {} samples and {} labels", data->train_x.size(0), data->train_y.size(0)));
  } catch (const std::invalid_argument& e) {
    check_message(out, "read_tensor_file", e.what(), {file.string() + ": ", file.string() + " "});
  } catch (const std::exception& e) {
    foreign(out, "read_tensor_file", e);
  }
  return out.verdict;
}

std::string pickled(const std::vector<std::pair<std::string, at::Tensor>>& items) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, v] : items) dict.insert(k, v);
  const auto bytes = torch::jit::pickle_save(dict);
  return {bytes.begin(), bytes.end()};
}

bool has_control(const std::vector<std::string>& args) {
  for (const auto& a : args)
    for (char c : a)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

Verdict check_collective(std::string_view input, bool skip_huge) {
  Outcome out;
  std::vector<std::string> args{"dtsim"};
  std::string current;
  for (char c : input) {
    if (c == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty() || input.empty()) args.push_back(current);
  if (skip_huge && args.size() > 64) return {Verdict::Kind::skipped, "", "more than 64 arguments"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());

  CLI::App app{"dtsim"};
  app.require_subcommand(1);
  cli::CollectiveCommand command(app);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    // CLI11's own errors (its type, its exit codes). They quote the arguments, so they
    // are one line unless an argument holds a newline (CLI11's formatting, not dtsim's).
    out.rejected(e.what());
    if (!has_control(args) && !is_one_line(e.what()))
      out.broken("CLI11: message on more than one line: " + printable(e.what()));
    return out.verdict;
  } catch (const std::exception& e) {
    foreign(out, "CLI11 parse", e);
    return out.verdict;
  }
  if (!command.parsed()) return out.verdict;
  runner::CollectiveSweep s;
  try {
    s = command.sweep();
  } catch (const config::InputError& e) {
    check_message(out, "collective flags", e.what(), {"-"});
    return out.verdict;
  } catch (const std::exception& e) {
    foreign(out, "collective flags", e);
    return out.verdict;
  }
  // Valid flags: run the sweep when it is small (a few ranks, a few sizes).
  int sizes = 1;
  for (auto b = std::optional<std::int64_t>(s.min_bytes); b && sizes <= 24; b = runner::next_collective_size(s, *b)) ++sizes;
  const bool small = s.ranks <= 16 && sizes <= 24 && s.max_bytes <= (std::int64_t{1} << 30) && s.topology.dims.size() <= 8 &&
                     (s.topology.kind != "fat_tree" || s.topology.k <= 8) &&
                     (s.topology.kind != "hierarchical" || s.topology.gpus_per_node <= 64);
  if (!small && skip_huge) return out.verdict;
  try {
    (void)runner::run_collective_sweep(s);
  } catch (const std::invalid_argument& e) {
    check_message(out, "run_collective_sweep", e.what(), {""});
  } catch (const std::exception& e) {
    foreign(out, "run_collective_sweep", e);
  }
  return out.verdict;
}

// --- seeds and the workspace ---------------------------------------------------------------------

std::vector<calibration::Sample> synthetic_samples() {
  std::vector<calibration::Sample> samples;
  for (double bytes : {1024.0, 65536.0, 1048576.0}) {
    samples.push_back({calibration::Probe::AllReduce, 4, bytes, 2 * 3 * 5e-6 + 2 * 0.75 * bytes / 2e9, "all"});
    samples.push_back({calibration::Probe::PointToPoint, 2, bytes, 4e-6 + bytes / 3e9, "same_host"});
    samples.push_back({calibration::Probe::PointToPoint, 2, bytes, 20e-6 + bytes / 1e9, "other_host"});
  }
  return samples;
}

std::string model_file_text() {
  const auto samples = synthetic_samples();
  return calibration::model_json(calibration::fit_model(samples), samples, "gloo").dump(1);
}

// A small scenario that refers to a file next to it.
std::string scenario_using(const json& workload, const json& network) {
  json doc = {{"name", "uses"},
              {"ranks", 4},
              {"steps", 2},
              {"workload", workload},
              {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}}},
              {"topology", {{"kind", "ring"}}},
              {"network", network}};
  return doc.dump(1);
}

const json& default_network() {
  static const json n = {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1.25}};
  return n;
}

std::string make_workspace() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/dtsim-fuzz-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("fuzz: cannot create a directory under " + pattern);
  const fs::path ws = pattern;
  for (const char* sub : {"sweeps", "traces", "model", "libsvm", "idx", "cifar10", "tensors", "system"})
    fs::create_directories(ws / sub);
  // What seeds refer to: scenarios next to the sweeps' "../x.json", data and model files.
  for (const auto& entry : fs::directory_iterator(fs::path(source_dir()) / "scenarios"))
    if (entry.path().extension() == ".json") fs::copy_file(entry.path(), ws / entry.path().filename());
  fs::copy_file(fs::path(source_dir()) / "tests" / "data" / "tiny.libsvm", ws / "tiny.libsvm");
  write_bytes(ws / "model.json", model_file_text());
  write_bytes(ws / "model" / "uses.json",
              scenario_using({{"type", "logistic_regression"}, {"samples", 64}, {"features", 4}},
                             {{"calibrated", "m.json"}}));
  write_bytes(ws / "libsvm" / "uses.json",
              scenario_using({{"type", "logistic_regression"}, {"libsvm_file", "d.libsvm"}, {"batch_size", 2}},
                             default_network()));
  return ws.string();
}

std::string trace_bytes(const comm::OpTrace& t) {
  const auto b = comm::to_bytes(t);
  return {b.begin(), b.end()};
}

// A trace with every kind of entry, as comm::to_bytes writes it.
comm::OpTrace every_kind_trace() {
  using Kind = comm::TracedOp::Kind;
  comm::OpTrace t;
  t.rank = 1;
  t.ranks = 4;
  t.phase_names = {"forward_pass", "backward_pass", "sync"};
  auto add = [&](Kind kind, int variant, std::int64_t numel, double seconds = 0, std::uint64_t op = 0,
                 std::vector<int> peers = {}, bool stream = false, at::ScalarType dtype = at::kFloat) {
    comm::TracedOp o;
    o.kind = kind;
    o.variant = variant;
    o.numel = numel;
    o.seconds = seconds;
    o.op = op;
    o.peer_slots = std::move(peers);
    o.stream = stream;
    o.dtype = dtype;
    t.ops.push_back(o);
  };
  add(Kind::Mark, static_cast<int>(comm::TraceMark::StepBegin), 0);
  add(Kind::PhaseBegin, 0, 0);
  add(Kind::Compute, 0, 0, 1.5e-6);
  add(Kind::PhaseEnd, 0, 0);
  add(Kind::AllReduce, 1, 65, 0, 0, {}, true);
  add(Kind::Wait, 0, 0, 0, 1);
  add(Kind::AllGather, 0, 16, 0, 0, {}, false, at::kByte);
  add(Kind::Broadcast, 2, 8);
  add(Kind::Exchange, 0, 32, 0, 0, {0, 1});
  add(Kind::Send, 1, 4, 0, 0, {}, false, at::kHalf);
  add(Kind::Recv, 0, 4);
  add(Kind::Wait, 0, 0, 0, 6);
  add(Kind::Mark, static_cast<int>(comm::TraceMark::StepEnd), 2080);
  add(Kind::Mark, static_cast<int>(comm::TraceMark::End), 0);
  t.operations = 8;
  return t;
}

std::string idx_bytes(const at::Tensor& data, bool gzip) {
  const fs::path file = fs::path(workspace()) / "idx" / "seed";
  workloads::write_idx(file.string(), data, gzip);
  return read_bytes(file);
}

std::string args(std::initializer_list<const char*> list) {
  std::string s;
  for (const char* a : list) {
    if (!s.empty()) s += '\0';
    s += a;
  }
  return s;
}

}  // namespace

const std::string& workspace() {
  // Never destroyed: the exit handler that removes the directory runs after the
  // destructors of statics constructed later than it was registered.
  static const std::string* ws = [] {
    const auto* dir = new std::string(make_workspace());
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(workspace(), ec);
    });
    return dir;
  }();
  return *ws;
}

Verdict check(Reader reader, std::string_view input, bool skip_huge) {
  switch (reader) {
    case Reader::scenario: return check_scenario(input, skip_huge);
    case Reader::sweep: return check_sweep(input, skip_huge);
    case Reader::op_trace: return check_op_trace(input);
    case Reader::network_model: return check_network_model(input);
    case Reader::libsvm: return check_libsvm(input);
    case Reader::idx: return check_idx(input);
    case Reader::cifar10: return check_cifar10(input);
    case Reader::tensors: return check_tensors(input);
    case Reader::collective_flags: return check_collective(input, skip_huge);
    case Reader::nccl_system: return check_nccl_system(input);
  }
  return {};
}

std::vector<std::string> seeds(Reader reader) {
  std::vector<std::string> out;
  auto files = [&](const fs::path& dir, const std::string& extension) {
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator(dir)) {
      // Not the schema, nor a result `dtsim run` wrote beside a scenario (ignored by git).
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() == extension && name != "scenario.schema.json" && !name.ends_with(".result.json"))
        found.push_back(entry.path());
    }
    std::sort(found.begin(), found.end());  // directory order is not deterministic
    for (const auto& f : found) out.push_back(read_bytes(f));
  };
  const fs::path src = source_dir();
  switch (reader) {
    case Reader::scenario:
      files(src / "scenarios", ".json");
      out.push_back(scenario_using({{"type", "logistic_regression"}, {"libsvm_file", "tiny.libsvm"}}, default_network()));
      out.push_back(scenario_using({{"type", "logistic_regression"}}, {{"calibrated", "model.json"}, {"model", "flow"}}));
      break;
    case Reader::sweep:
      files(src / "scenarios" / "sweeps", ".json");
      break;
    case Reader::op_trace: {
      out.push_back(trace_bytes(every_kind_trace()));
      comm::OpTrace empty;
      out.push_back(trace_bytes(empty));
      break;
    }
    case Reader::network_model:
      out.push_back(model_file_text());
      out.push_back(R"({"dtsim_network_model": 1, "model": "alpha_beta", "latency_us": 3, "bandwidth_GBps": 1.5})");
      break;
    case Reader::libsvm:
      out.push_back(read_bytes(src / "tests" / "data" / "tiny.libsvm"));
      out.push_back("+1 1:0.5 3:-2e-3\n-1 2:4\n0 1:1 # comment\n\n1 3:0.25\n");
      break;
    case Reader::idx: {
      const auto images = at::arange(2 * 3 * 4, at::kByte).reshape({2, 3, 4});
      const auto labels = at::arange(5, at::kByte);
      for (bool gzip : {false, true}) {
        out.push_back(idx_bytes(images, gzip));
        out.push_back(idx_bytes(labels, gzip));
      }
      break;
    }
    case Reader::cifar10:
      out.push_back(cifar_record(0, 1) + cifar_record(9, 200));
      out.push_back(cifar_record(5, 0));
      break;
    case Reader::tensors:
      out.push_back(read_bytes(src / "tests" / "data" / "tiny_tensors.pt"));  // Python's torch.save (zip)
      out.push_back(pickled({{"x", at::arange(12, at::kFloat).reshape({3, 2, 2})}, {"y", at::arange(3, at::kLong)}}));
      out.push_back(pickled({{"x", at::rand({4, 1, 2, 2}, at::kDouble)},
                             {"y", at::tensor({1, 0, 1, 0}, at::kLong)},
                             {"test_x", at::rand({1, 1, 2, 2}, at::kDouble)},
                             {"test_y", at::tensor({1}, at::kLong)}}));
      break;
    case Reader::collective_flags:
      out.push_back(args({"collective", "-n", "8", "-b", "8", "-e", "1G", "-f", "2"}));
      out.push_back(args({"collective", "--topology", "torus:8x8", "--model", "flow", "-e", "1M"}));
      out.push_back(args({"collective", "--op", "broadcast", "-r", "3", "-n", "8", "--topology", "hypercube", "--algo",
                          "binomial", "-e", "64K"}));
      out.push_back(args({"collective", "-n", "16", "--topology", "fat_tree:4", "--algo", "ring", "-i", "1K", "-e",
                          "8K", "--model", "alpha_beta"}));
      out.push_back(args({"collective", "--topology", "hierarchical:4:direct", "-n", "8", "--model", "analytical",
                          "--latency-us", "2.5", "--bandwidth-GBps", "25", "--op", "allgather"}));
      out.push_back(args({"collective", "--op", "reducescatter", "-n", "6", "--topology", "complete", "-b", "4K", "-e",
                          "4M", "-f", "4"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "a100_8x", "-g", "8", "-b", "1K", "-e", "8G"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "h100_8x", "--nodes", "2", "--op", "alltoall", "-b",
                          "1M", "-e", "64M", "-f", "8"}));
      out.push_back(args({"collective", "--op", "sendrecv", "-n", "8", "--topology", "star", "--model", "flow", "-e", "1M"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "a100_8x", "--op", "reduce", "-r", "2", "-e", "1M"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "h100_8x", "--nodes", "2", "--op", "allgather",
                          "--nccl-algo", "Ring", "--nccl-proto", "^LL128", "-e", "64M", "-f", "4"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "h100_8x", "--op", "reducescatter", "--nccl-version",
                          "2.20", "-b", "1M", "-e", "8M"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "h100_8x", "--nodes", "4", "--nccl-algo", "NVLSTree",
                          "--nccl-version", "2.21", "-b", "3M", "-e", "96M", "-f", "4"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "a100_pcie_pairs", "--nccl-algo", "NVLS", "--nccl-proto",
                          "^LL", "--nccl-version", "2.22", "-b", "1", "-e", "1M", "-f", "8"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "h100_8x", "--nodes", "2", "--op", "reducescatter",
                          "--nccl-version", "2.23.4", "-b", "8", "-e", "256M", "-f", "16"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "a100_8x", "--nccl-version", "2.24", "--nccl-algo",
                          "ring;allreduce:tree", "--nccl-proto", "^LL128;allreduce:LL", "-e", "1M", "-f", "16"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "b200_8x", "--nodes", "2", "--op", "allgather", "-b",
                          "4K", "-e", "1G", "-f", "16"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "h100_8x", "--nccl-max-nchannels", "4", "--nccl-min-ctas",
                          "2", "--nccl-max-ctas", "8", "--nccl-version", "2.22", "-e", "256M", "-f", "16"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "a100_8x", "--nccl-min-nchannels", "32", "--op",
                          "sendrecv", "-b", "1M", "-e", "64M", "-f", "8"}));
      out.push_back(args({"collective", "--model", "nccl", "--system", "a100_8x", "--nodes", "2", "--nccl-max-p2p-nchannels",
                          "8", "--nccl-nchannels-per-net-peer", "4", "--op", "alltoall", "-b", "1M", "-e", "64M", "-f", "8"}));
      // One GPU a node: PAT.
      for (const char* op : {"allgather", "reducescatter"})
        out.push_back(args({"collective", "--model", "nccl", "--system",
                            (source_dir() + "/scenarios/systems/h100_16_nodes_of_1.json").c_str(), "--nodes", "5", "--op", op,
                            "--nccl-version", "2.25", "-b", "40", "-e", "1G", "-f", "8"}));
      break;
    case Reader::nccl_system:
      out.push_back(net::nccl::system_json(*net::nccl::find_system_preset("a100_pcie_pairs")).dump(1));
      out.push_back(R"({"preset": "h100_8x", "nodes": 2, "network": {"collnet": true}, "nccl_version": "2.20.5"})");
      out.push_back(R"({"preset": "a100_8x", "nodes": 4, "nccl_version": "2.21.5"})");
      out.push_back(R"({"preset": "h200_8x", "nodes": 2, "nccl_version": "2.22.3"})");
      out.push_back(R"({"preset": "h100_8x", "gpus_per_node": 1, "sockets": 1, "nodes": 4, "nccl_version": "2.23"})");
      out.push_back(R"({"preset": "b200_8x", "nodes": 2, "nccl_version": "2.25.1"})");
      out.push_back(R"({"preset": "b200_8x", "nccl_version": "2.27.7"})");
      out.push_back(R"({"preset": "h100_8x", "gpus_per_node": 2, "nodes": 2, "network": {"collnet": true}, "nccl_version": "2.28.9"})");
      out.push_back(R"({"preset": "b200_8x", "nodes": 2, "nccl_version": "2.29.7"})");
      out.push_back(R"({"preset": "b200_8x", "gpus_per_node": 4, "sockets": 1, "cpu": "arm", "nodes": 2, "nccl_version": "2.30"})");
      out.push_back(R"({"preset": "b200_8x", "nodes": 4, "network": {"nic_Gbps": 800}, "pcie": {"generation": 6}, "nccl_version": "2.30"})");
      out.push_back(R"({"gpu": "volta", "gpus_per_node": 4, "intra": {"kind": "pcie", "nvlink_pairs": [[0, 1]]},
                        "cpu": "intel", "sockets": 2, "pcie": {"generation": 3}})");
      break;
  }
  return out;
}

}  // namespace dtsim::fuzz
