// One table per concept: the registries of algorithms, workload types, data sources,
// compressor kinds, network models, topologies and collective algorithms are the only lists of names, and
// everything else follows them:
// - the JSON Schema, generated from the entries' parse functions (runner/scenario_schema.hpp),
//   lists exactly the registries' names and, per entry, exactly the fields the entry
//   declares; scenarios/scenario.schema.json is that schema as `dtsim schema` prints it;
// - every scenario file in scenarios/ survives parse -> to_json -> parse unchanged;
// - every field an entry reads appears in to_json, so a sweep axis can name it (the
//   algorithm's lr_schedule, left out of the echo at its default, when it is set).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "algorithms/lr_schedule.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/powersgd_options.hpp"
#include "algorithms/spec_fields.hpp"
#include "kernels/compressor_kinds.hpp"
#include "network_models/network.hpp"
#include "network_models/network_model.hpp"
#include "network_models/topology.hpp"
#include "network_models/topology_kinds.hpp"
#include "runner/scenario.hpp"
#include "runner/scenario_schema.hpp"
#include "runner/schema.hpp"
#include "sweep/sweep.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim {
namespace {

using nlohmann::json;
using Names = std::set<std::string>;

const json& schema_def(const std::string& name) { return runner::scenario_schema().at("$defs").at(name); }

Names enum_of(const json& property) {
  Names names;
  for (const auto& v : property.at("enum")) names.insert(v.get<std::string>());
  return names;
}

template <class List>
Names names_of(const List& list) {
  Names names;
  for (const auto& n : list) names.insert(std::string(n));
  return names;
}

// The keys of an if/then block's "then.properties", less `except`.
Names then_fields(const json& block, const Names& except) {
  Names fields;
  for (const auto& [key, value] : block.at("then").at("properties").items())
    if (!except.count(key)) fields.insert(key);
  return fields;
}

// The values `key` takes in an if block: {"properties": {key: {"const" | "enum"}}}, also
// under anyOf (the workload's type-or-kind blocks).
Names if_values(const json& condition, const std::string& key) {
  Names out;
  if (condition.contains("properties") && condition["properties"].contains(key)) {
    const auto& p = condition["properties"][key];
    if (p.contains("const")) out.insert(p["const"].get<std::string>());
    if (p.contains("enum"))
      for (const auto& v : p["enum"]) out.insert(v.get<std::string>());
  }
  if (condition.contains("anyOf"))
    for (const auto& alternative : condition["anyOf"]) {
      const auto more = if_values(alternative, key);
      out.insert(more.begin(), more.end());
    }
  return out;
}

// The field set the schema allows for the entry named `name`: the entry's then-block (the
// one that closes the object) whose condition names it (exactly one must); a section's
// cross-field rules (a fat-tree's even k) are not entry blocks.
Names schema_fields_of(const json& def, const std::string& key, const std::string& name, const Names& except) {
  const json* found = nullptr;
  for (const auto& block : def.at("allOf"))
    if (block.contains("if") && block.contains("then") && block["then"].contains("additionalProperties") &&
        if_values(block["if"], key).count(name)) {
      EXPECT_EQ(found, nullptr) << key << " " << name << ": more than one schema block";
      found = &block;
    }
  if (!found) {
    ADD_FAILURE() << key << " " << name << ": no schema block names it";
    return {};
  }
  return then_fields(*found, except);
}

TEST(Registry, NamesAreUniqueAndFound) {
  Names algorithms;
  for (const auto* e : algorithms::algorithm_entries()) {
    EXPECT_TRUE(algorithms.insert(e->name).second) << e->name;
    EXPECT_EQ(algorithms::find_algorithm(e->name), e);
    EXPECT_FALSE(e->description.empty()) << e->name;
    EXPECT_FALSE(e->paper.empty()) << e->name;
    EXPECT_EQ(names_of(e->fields).size(), e->fields.size()) << e->name << ": a field listed twice";
  }
  EXPECT_EQ(algorithms::find_algorithm("adam"), nullptr);
  Names workloads;
  for (const auto* e : workloads::workload_entries()) {
    EXPECT_TRUE(workloads.insert(e->name).second) << e->name;
    EXPECT_EQ(workloads::find_workload(e->name), e);
    EXPECT_FALSE(e->description.empty()) << e->name;
  }
  Names kinds;
  for (const auto& k : kernels::compressor_kinds()) {
    EXPECT_TRUE(kinds.insert(std::string(k.name)).second) << k.name;
    EXPECT_EQ(kernels::find_compressor_kind(k.name), &k);
    EXPECT_EQ(&kernels::compressor_kind_info(k.name), &k);
  }
}

TEST(Registry, SchemaListsExactlyTheAlgorithmsAndTheirFields) {
  const auto& def = schema_def("algorithm");
  EXPECT_EQ(enum_of(def.at("properties").at("name")), names_of(algorithms::algorithm_names()));
  for (const auto* e : algorithms::algorithm_entries())
    EXPECT_EQ(schema_fields_of(def, "name", e->name, {"name"}), names_of(e->fields)) << e->name;
}

TEST(Registry, SchemaListsExactlyTheWorkloadTypesAndTheirFields) {
  const auto& def = schema_def("workload");
  EXPECT_EQ(enum_of(def.at("properties").at("type")), names_of(workloads::workload_types()));
  EXPECT_EQ(enum_of(def.at("properties").at("kind")), names_of(workloads::workload_types()));
  for (const auto* e : workloads::workload_entries())
    EXPECT_EQ(schema_fields_of(def, "type", e->name, {"type", "kind"}), names_of(e->fields)) << e->name;
}

// Every data source's fields are workload fields; each workload type's block allows
// exactly the sources it trains on.
TEST(Registry, SchemaListsExactlyTheDataSourcesAndTheirFields) {
  const auto& def = schema_def("workload");
  EXPECT_EQ(enum_of(def.at("properties").at("data")), names_of(workloads::data_source_names()));
  for (const auto* e : workloads::data_source_entries())
    for (const auto& f : e->fields) EXPECT_TRUE(def.at("properties").contains(f)) << e->name << ": " << f;
  for (const auto* e : workloads::workload_entries()) {
    if (e->data_sources.empty()) {
      EXPECT_FALSE(std::count(e->fields.begin(), e->fields.end(), "data")) << e->name;
      continue;
    }
    for (const auto& block : def.at("allOf"))
      if (block.contains("if") && if_values(block["if"], "type").count(e->name)) {
        EXPECT_EQ(enum_of(block.at("then").at("properties").at("data")), names_of(e->data_sources)) << e->name;
      }
  }
}

// scenarios/scenario.schema.json (for editors) is the generated schema, and the generator
// could state every field.
TEST(Registry, CommittedSchemaIsTheGeneratedOne) {
  const auto& generated = runner::generated_scenario_schema();
  for (const auto& problem : generated.problems) ADD_FAILURE() << problem;
  std::ifstream in(std::filesystem::path(DTSIM_SOURCE_DIR) / "scenarios" / "scenario.schema.json");
  const std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(committed == runner::scenario_schema_text())
      << "scenarios/scenario.schema.json is not the schema this dtsim generates; regenerate it with\n"
         "  build/release/dtsim schema > scenarios/scenario.schema.json";
}

TEST(Registry, SchemaListsExactlyTheCompressorKindsAndTheirFields) {
  const auto& def = schema_def("compressor");
  EXPECT_EQ(enum_of(def.at("properties").at("kind")), names_of(kernels::compressor_kind_names()));
  for (const auto& k : kernels::compressor_kinds())
    EXPECT_EQ(schema_fields_of(def, "kind", std::string(k.name), {"kind"}), names_of(k.field_names())) << k.name;
}

TEST(Registry, SchemaListsExactlyTheLrScheduleTypesAndTheirFields) {
  const auto& def = schema_def("lr_schedule");
  Names types;
  for (const auto* t : algorithms::lr_schedule_entries()) types.insert(std::string(t->name));
  EXPECT_EQ(enum_of(def.at("properties").at("type")), types);
  for (const auto* t : algorithms::lr_schedule_entries()) {
    Names fields = names_of(algorithms::lr_schedule_common_fields());
    fields.insert(t->fields.begin(), t->fields.end());
    EXPECT_EQ(schema_fields_of(def, "type", std::string(t->name), {"type"}), fields) << t->name;
  }
}

TEST(Registry, SchemaListsExactlyTheNetworkModelsTopologiesAndCollectiveAlgorithms) {
  EXPECT_EQ(enum_of(schema_def("network").at("properties").at("model")), names_of(net::network_models()));
  EXPECT_EQ(enum_of(schema_def("topology").at("properties").at("kind")), names_of(net::topology_kinds()));
  for (const auto& k : net::topology_kind_table())
    EXPECT_EQ(schema_fields_of(schema_def("topology"), "kind", k.name, {"kind"}), names_of(k.fields)) << k.name;
  const auto& algorithms = schema_def("network").at("properties").at("algorithms").at("properties");
  const std::vector<std::pair<std::string, net::CollectiveKind>> kinds{{"all_reduce", net::CollectiveKind::AllReduce},
                                                                      {"reduce_scatter", net::CollectiveKind::ReduceScatter},
                                                                      {"all_gather", net::CollectiveKind::AllGather},
                                                                      {"broadcast", net::CollectiveKind::Broadcast}};
  for (const auto& [key, kind] : kinds) {
    Names expected{"auto"};
    for (auto a : net::algorithms_for(kind)) expected.insert(net::to_string(a));
    EXPECT_EQ(enum_of(algorithms.at(key)), expected) << key;
  }
}

// The scenario inputs: not the schema, nor what `dtsim run` wrote beside one
// (<scenario>.result.json, ignored by git), which is no scenario.
std::vector<std::filesystem::path> scenario_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(DTSIM_SOURCE_DIR) / "scenarios")) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".json" && name != "scenario.schema.json" && !name.ends_with(".result.json"))
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Registry, EveryScenarioFileRoundTripsThroughToJson) {
  const auto files = scenario_files();
  ASSERT_GE(files.size(), 30u);
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    const auto s = runner::load_scenario(file);
    const json once = s.to_json();
    const auto again = runner::parse_scenario(once);
    EXPECT_EQ(again.to_json(), once);
  }
}

// A scenario of 4 ranks (ring, alpha_beta) with `workload` and `algorithm`.
json scenario_with(json workload, json algorithm) {
  return {{"name", "registry"},
          {"ranks", 4},
          {"steps", 2},
          {"workload", std::move(workload)},
          {"algorithm", std::move(algorithm)},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 1}, {"bandwidth_GBps", 10}}}};
}

// Every field at `path` in `echoed` (to_json of a parsed scenario) can be an axis: a sweep
// over it with its echoed value expands, and the point's scenario echoes that value.
void expect_sweepable(const json& base, const json& echoed, const std::string& path) {
  const json ptr_value = echoed.at(json::json_pointer(path));
  const json sweep = {{"base", base}, {"axes", {{{"path", path}, {"values", {ptr_value}}}}}};
  try {
    const auto s = sweep::parse_sweep(sweep, ".");
    ASSERT_EQ(s.points.size(), 1u);
    EXPECT_EQ(s.points[0].scenario.to_json().at(json::json_pointer(path)), ptr_value) << path;
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": " << e.what();
  }
}

// Required fields of an entry that has no default, with a value it accepts.
json minimal_algorithm(const std::string& name) {
  json a = {{"name", name}, {"lr", 0.1}};
  if (name == "parallel_sgd") {
    a["variant"] = "decentralized";
    a["optimizer"] = {{"name", "adamw"}};  // read and echoed only when given
  }
  if (name == "sparsified_sgd") a["compressor"] = {{"kind", "top_k"}};  // identity is refused at load
  if (name == "diloco") a["outer_codec"] = "fp4";  // fp4_block is read (and echoed) with fp4 only
  return a;
}

TEST(Registry, EveryFieldOfEveryAlgorithmIsEchoedAndSweepable) {
  const json workload = {{"type", "logistic_regression"}, {"samples", 64}, {"features", 4}};
  const auto& optimizer_names = algorithms::optimizer_fields();
  for (const auto* e : algorithms::algorithm_entries()) {
    // distopt's variants, ddp's hook powersgd and parallel_sgd's centralized powersgd (their
    // own fields), each in turn.
    for (const std::string variant : {"", "sync", "half", "partial", "sparse", "powersgd"}) {
      if (!variant.empty() && e->name != "distopt" && e->name != "ddp" && e->name != "parallel_sgd") continue;
      if ((e->name == "ddp" || e->name == "parallel_sgd") && !variant.empty() && variant != "powersgd") continue;
      if (e->name == "distopt" && variant == "powersgd") continue;
      json algorithm = minimal_algorithm(e->name);
      if (e->name == "parallel_sgd" && variant == "powersgd") {
        algorithm["variant"] = "centralized";
        algorithm["gradient_compression"] = "powersgd";
      } else if (!variant.empty()) {
        algorithm[e->name == "ddp" ? "hook" : "variant"] = variant;
      }
      // The default lr_schedule (constant) is left out of the echo; any other is echoed.
      algorithm["lr_schedule"] = {{"warmup_epochs", 1}};
      const json base = scenario_with(workload, algorithm);
      const json echoed = runner::parse_scenario(base).to_json();
      for (const auto& field : e->fields) {
        // distopt's variant-only fields are echoed (and read) under their variant only.
        const bool other_variant = e->name == "distopt" &&
                                   (((field == "clipping" || field == "clip_value") && variant != "half") ||
                                    ((field == "spars" || field == "top_k" || field == "corr" || field == "exchange") &&
                                     variant != "sparse"));
        // ddp's PowerSGD fields likewise, under hook powersgd only.
        const bool other_hook = e->name == "ddp" && variant.empty() && field != "hook" && field != "bucket_cap_mb" &&
                                field != "first_bucket_mb" &&
                                std::find(optimizer_names.begin(), optimizer_names.end(), field) == optimizer_names.end();
        // parallel_sgd's gradient_compression and PowerSGD fields under the centralized
        // powersgd only, its compressor under the decentralized variant only.
        const auto& powersgd_names = algorithms::powersgd_fields();
        const bool powersgd_field = field == "gradient_compression" ||
                                    std::find(powersgd_names.begin(), powersgd_names.end(), field) != powersgd_names.end();
        const bool other_compression =
            e->name == "parallel_sgd" && (variant.empty() ? powersgd_field : field == "compressor");
        if (other_variant || other_hook || other_compression || (e->name == "distopt" && variant.empty())) continue;
        ASSERT_TRUE(echoed.at("algorithm").contains(field)) << e->name << " " << variant << ": " << field << " not echoed";
        expect_sweepable(base, echoed, "/algorithm/" + field);
      }
    }
  }
}

TEST(Registry, EveryFieldOfEveryCompressorKindIsEchoedAndSweepable) {
  const json workload = {{"type", "logistic_regression"}, {"samples", 64}, {"features", 4}};
  for (const auto& k : kernels::compressor_kinds()) {
    // Gossip takes every kind whose payload size is fixed by the shapes; the others go
    // through sparsified SGD's all-gather.
    json algorithm = minimal_algorithm(k.size_depends_on_data ? "sparsified_sgd" : "choco_sgd");
    algorithm["compressor"] = {{"kind", std::string(k.name)}};
    const json base = scenario_with(workload, algorithm);
    const json echoed = runner::parse_scenario(base).to_json();
    const auto& compressor = echoed.at("algorithm").at("compressor");
    const auto fields = k.field_names();
    EXPECT_EQ(compressor.size(), fields.size() + 1) << k.name << ": echoes a field it does not read";
    for (const auto& field : fields) {
      ASSERT_TRUE(compressor.contains(std::string(field))) << k.name << ": " << field << " not echoed";
      expect_sweepable(base, echoed, "/algorithm/compressor/" + std::string(field));
    }
    // A field the kind does not read is refused, naming it (no silent default).
    for (const auto other_field : kernels::compressor_spec_fields()) {
      const std::string other(other_field);
      if (k.reads(other)) continue;
      json bad = base;
      bad["algorithm"]["compressor"][other] = json(compressor.contains(other) ? compressor[other] : json(0));
      try {
        runner::parse_scenario(bad);
        ADD_FAILURE() << k.name << " accepted " << other;
      } catch (const runner::ScenarioError& e) {
        EXPECT_EQ(e.path(), "/algorithm/compressor/" + other);
        EXPECT_EQ(e.kind(), runner::ErrorKind::unknown_field);
      }
    }
  }
}

// Every schedule type's fields (and the scale-up's) are echoed and sweepable at
// /algorithm/lr_schedule/...; a field another type reads is refused, naming it.
TEST(Registry, EveryFieldOfEveryLrScheduleTypeIsEchoedAndSweepable) {
  const json workload = {{"type", "logistic_regression"}, {"samples", 64}, {"features", 4}};
  std::vector<std::string> all_fields;
  for (const auto* t : algorithms::lr_schedule_entries()) all_fields.insert(all_fields.end(), t->fields.begin(), t->fields.end());
  for (const auto* t : algorithms::lr_schedule_entries()) {
    json schedule = t->example;  // its required fields
    schedule["type"] = std::string(t->name);
    if (t->scales) schedule["lr_scaleup"] = {{"factor", "graph"}, {"base_batch_size", 8}};
    json algorithm = minimal_algorithm("choco_sgd");
    algorithm["lr_schedule"] = schedule;
    const json base = scenario_with(workload, algorithm);
    const json echoed = runner::parse_scenario(base).to_json();
    const auto& echo = echoed.at("algorithm").at("lr_schedule");
    EXPECT_EQ(echo.size(), algorithms::lr_schedule_common_fields().size() + t->fields.size() + 1)
        << t->name << ": echoes a field it does not read";
    std::vector<std::string> fields = algorithms::lr_schedule_common_fields();
    fields.insert(fields.end(), t->fields.begin(), t->fields.end());
    for (const auto& field : fields) {
      ASSERT_TRUE(echo.contains(field)) << t->name << ": " << field << " not echoed";
      expect_sweepable(base, echoed, "/algorithm/lr_schedule/" + field);
    }
    expect_sweepable(base, echoed, "/algorithm/lr_schedule/lr_scaleup/factor");
    if (t->scales) expect_sweepable(base, echoed, "/algorithm/lr_schedule/lr_scaleup/base_batch_size");
    for (const auto& other : all_fields) {
      if (std::find(t->fields.begin(), t->fields.end(), other) != t->fields.end()) continue;
      json bad = base;
      bad["algorithm"]["lr_schedule"][other] = 1;
      try {
        runner::parse_scenario(bad);
        ADD_FAILURE() << t->name << " accepted " << other;
      } catch (const runner::ScenarioError& e) {
        EXPECT_EQ(e.path(), "/algorithm/lr_schedule/" + other);
        EXPECT_EQ(e.kind(), runner::ErrorKind::unknown_field);
      }
    }
  }
}

// Every (workload type, data source) pair: its type's own fields, "data" and the source's
// fields are echoed, each can be swept, and nothing else is echoed.
TEST(Registry, EveryFieldOfEveryWorkloadTypeAndDataSourceIsEchoedAndSweepable) {
  const auto dir = std::filesystem::temp_directory_path() / "dtsim_registry_test_data";
  std::filesystem::create_directories(dir);
  const auto libsvm = (dir / "eight.libsvm").string();
  {
    std::ofstream out(libsvm);
    for (int i = 0; i < 8; ++i) out << (i % 2 ? "+1" : "-1") << " 1:" << i << " 3:0.5\n";
  }
  const auto tensors = (dir / "eight.pt").string();
  {
    c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
    dict.insert("x", at::rand({8, 1, 32, 32}));  // 32 x 32: every image type takes it (resnet20_real only that)
    dict.insert("y", at::arange(8, at::kLong).remainder(3));
    const auto bytes = torch::jit::pickle_save(dict);
    std::ofstream(tensors, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const auto tokens = (dir / "tokens.pt").string();  // gpt's data tokens: 8 rows of 16 tokens
  {
    c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
    dict.insert("x", at::arange(128, at::kLong).view({8, 16}));
    dict.insert("y", at::arange(1, 129, at::kLong).view({8, 16}));
    const auto bytes = torch::jit::pickle_save(dict);
    std::ofstream(tokens, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  // A TorchScript model for any input shape: the mean of a sample times 10 weights.
  const auto model = (dir / "any_shape.pt").string();
  {
    torch::jit::Module m("dtsim_registry_test.AnyShape");
    m.register_attribute("training", c10::BoolType::get(), true);
    m.register_parameter("w", at::ones({1, 10}).requires_grad_(), false);
    m.define("def forward(self, x):\n    return torch.matmul(torch.mean(torch.flatten(x, 1), 1, True), self.w)\n");
    m.save(model);
  }
  for (const auto* e : workloads::workload_entries()) {
    const auto data_fields = workloads::with_data_fields({}, e->data_sources);
    Names own;
    for (const auto& f : e->fields)
      if (e->data_sources.empty() || !std::count(data_fields.begin(), data_fields.end(), f)) own.insert(f);
    std::vector<std::string> sources = e->data_sources;
    if (sources.empty()) sources.push_back("");  // a shape-only model: no data
    for (const auto& source : sources) {
      SCOPED_TRACE(e->name + " on " + (source.empty() ? "no data" : source));
      json workload = {{"type", e->name}};
      Names expected = own;
      expected.insert("type");
      if (!source.empty()) {
        workload["data"] = source;
        const auto& fields = workloads::data_source_entry(source).fields;
        expected.insert("data");
        expected.insert(fields.begin(), fields.end());
      }
      if (source == "synthetic") workload["samples"] = 64;
      if (source == "libsvm") workload["libsvm_file"] = libsvm;
      if (source == "cifar10") workload["data_dir"] = dir.string();  // read when the run loads it
      if (source == "tensors") workload["tensors_file"] = tensors;
      if (source == "tokens") workload["tokens_file"] = tokens;
      if (e->name == "torchscript") {
        workload["model_file"] = model;
        workload["input_shape"] = source == "fashion_mnist" ? json{1, 28, 28} : source == "cifar10" ? json{3, 32, 32}
                                                                                                    : json{1, 32, 32};
      }
      const json base = scenario_with(workload, minimal_algorithm("parallel_sgd"));
      const json echoed = runner::parse_scenario(base).to_json();
      Names keys;
      for (const auto& [key, value] : echoed.at("workload").items()) keys.insert(key);
      EXPECT_EQ(keys, expected);
      for (const auto& field : expected)
        if (field != "type") expect_sweepable(base, echoed, "/workload/" + field);
    }
  }
  std::filesystem::remove_all(dir);
}

// A scenario names one data source: another source's field, a source its type does not
// train on, or an unknown one is refused at the field, with its kind.
TEST(Registry, DataSourcesAreChosenOnceAndExplicitly) {
  auto error_of = [](json workload) -> std::pair<std::string, runner::ErrorKind> {
    try {
      runner::parse_scenario(scenario_with(std::move(workload), minimal_algorithm("parallel_sgd")));
    } catch (const runner::ScenarioError& e) {
      return {std::string(e.what()), e.kind()};
    }
    return {"accepted", runner::ErrorKind::syntax};
  };
  auto [mixed, mixed_kind] = error_of({{"type", "logistic_regression"}, {"data", "synthetic"}, {"libsvm_file", "x"}});
  EXPECT_EQ(mixed,
            "/workload/libsvm_file: a field of data libsvm, not of data synthetic (its fields: samples, features, unit_norm)");
  EXPECT_EQ(mixed_kind, runner::ErrorKind::unknown_field);
  auto [wrong, wrong_kind] = error_of({{"type", "mlp"}, {"data", "synthetic"}});
  EXPECT_EQ(wrong, "/workload/data: workload type mlp trains on fashion_mnist or cifar10 or tensors, not synthetic");
  EXPECT_EQ(wrong_kind, runner::ErrorKind::unknown_name);
  auto [unknown, unknown_kind] = error_of({{"type", "mlp"}, {"data", "imagenet"}});
  EXPECT_NE(unknown.find("/workload/data: "), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("fashion_mnist"), std::string::npos) << unknown;
  EXPECT_EQ(unknown_kind, runner::ErrorKind::unknown_name);
  auto [shape_only, shape_kind] = error_of({{"type", "resnet50"}, {"data", "fashion_mnist"}});
  EXPECT_NE(shape_only.find("/workload/data: not a field of workload type resnet50"), std::string::npos) << shape_only;
  EXPECT_EQ(shape_kind, runner::ErrorKind::unknown_field);
  // Without "data": the type's first source, or the one a field selects.
  EXPECT_EQ(runner::parse_scenario(scenario_with({{"type", "logistic_regression"}}, minimal_algorithm("parallel_sgd")))
                .workload.data.source,
            "synthetic");
  EXPECT_EQ(runner::parse_scenario(scenario_with({{"type", "cnn"}}, minimal_algorithm("parallel_sgd"))).workload.data.source,
            "fashion_mnist");
}

// The sweep tells an axis that names no field from a value the field refuses by the
// error's kind (not its text).
TEST(Registry, ErrorsCarryTheirKind) {
  auto kind_of = [](json doc) {
    try {
      runner::parse_scenario(doc);
    } catch (const runner::ScenarioError& e) {
      return e.kind();
    }
    ADD_FAILURE() << "accepted " << doc.dump();
    return runner::ErrorKind::syntax;
  };
  const json base = scenario_with({{"type", "logistic_regression"}, {"samples", 64}}, minimal_algorithm("choco_sgd"));
  auto with = [&](const std::string& pointer, json value) {
    json d = base;
    d[json::json_pointer(pointer)] = std::move(value);
    return d;
  };
  EXPECT_EQ(kind_of(with("/algorithm/local_steps", 2)), runner::ErrorKind::unknown_field);
  EXPECT_EQ(kind_of(with("/algorithm/lr", -1)), runner::ErrorKind::out_of_range);
  EXPECT_EQ(kind_of(with("/algorithm/lr", "fast")), runner::ErrorKind::wrong_type);
  EXPECT_EQ(kind_of(with("/algorithm/name", "adam")), runner::ErrorKind::unknown_name);
  EXPECT_EQ(kind_of(with("/workload/samples", 2)), runner::ErrorKind::inconsistent);
  json no_lr = base;
  no_lr["algorithm"].erase("lr");
  EXPECT_EQ(kind_of(no_lr), runner::ErrorKind::missing_field);
}

}  // namespace
}  // namespace dtsim
