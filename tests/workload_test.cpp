// The logistic-regression workload's data sources and batching: LIBSVM files (parsing,
// errors with file:line, scenario paths, a run that learns) and the full-batch
// deterministic mode (reproducible losses, the closed-form gradient).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "test_util.hpp"
#include "workloads/data_source.hpp"
#include "workloads/logistic_regression.hpp"
#include "workloads/sources/libsvm.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim {
namespace {

using nlohmann::json;

const std::string kTiny = std::string(DTSIM_SOURCE_DIR) + "/tests/data/tiny.libsvm";

// tests/data/tiny.libsvm, written out by hand.
at::Tensor tiny_x() {
  return at::tensor({1.5f, 0.5f, 0.0f,    -1.0f, 0.0f, 2.0f,  2.0f, 1.0f, -0.5f,  0.0f, -1.5f, 0.0f,
                     0.5f, 2.0f, 0.0f,    -2.0f, -0.5f, 1.0f, 1.0f, 0.0f, -1.0f,  -0.5f, -1.0f, 0.5f,
                     0.0f, 1.5f, -1.5f,   -1.5f, 0.0f, 1.5f,  0.75f, 0.25f, -0.25f, -0.25f, -2.0f, 0.0f},
                    at::kFloat)
      .reshape({12, 3});
}
at::Tensor tiny_y() { return at::tensor({1.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f, 0.f}, at::kFloat); }

std::string parse_error(const std::string& text, std::int64_t features = 0) {
  std::istringstream in(text);
  try {
    workloads::parse_libsvm(in, "bad.txt", features);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

json tiny_scenario(const std::string& file, const json& batch_size, const std::string& variant = "decentralized") {
  return json{{"name", "tiny"},
              {"ranks", 2},
              {"steps", 40},
              {"seed", 5},
              {"workload", {{"kind", "logistic_regression"}, {"libsvm_file", file}, {"batch_size", batch_size}}},
              {"algorithm", {{"name", "parallel_sgd"}, {"variant", variant}, {"lr", 0.5}}},
              {"topology", {{"kind", "ring"}}},
              {"network", {{"model", "alpha_beta"}, {"latency_us", 3}, {"bandwidth_GBps", 2}}}};
}

// A workload type trains on every source of the kind of samples its default yields, the
// default first: a new source of that kind is accepted without naming it anywhere else.
TEST(DataSources, ATypeAcceptsEverySourceOfItsKind) {
  using workloads::SampleKind;
  EXPECT_EQ(workloads::find_workload("mlp")->data_sources,
            (std::vector<std::string>{"fashion_mnist", "cifar10", "tensors"}));
  EXPECT_EQ(workloads::find_workload("logistic_regression")->data_sources,
            (std::vector<std::string>{"synthetic", "libsvm"}));
  EXPECT_EQ(workloads::find_workload("gpt")->data_sources, (std::vector<std::string>{"text", "tokens"}));
  for (const auto* type : workloads::workload_entries()) {
    if (type->data_sources.empty()) continue;  // a shape-only model
    const auto kind = workloads::data_source_entry(type->data_sources.front()).yields;
    std::vector<std::string> of_kind;
    for (const auto* source : workloads::data_source_entries())
      if (source->yields == kind) of_kind.push_back(source->name);
    auto accepted = type->data_sources;
    std::sort(accepted.begin(), accepted.end());
    std::sort(of_kind.begin(), of_kind.end());
    EXPECT_EQ(accepted, of_kind) << type->name;
  }
  EXPECT_THROW(workloads::sources_yielding(SampleKind::token_windows, "cifar10"), std::logic_error);
}

TEST(Libsvm, ParsesTheFileIntoTheHandWrittenTensors) {
  const auto data = workloads::load_libsvm(kTiny);
  ASSERT_EQ(data->x.sizes(), (std::vector<std::int64_t>{12, 3}));
  EXPECT_TRUE(at::equal(data->x, tiny_x())) << data->x;
  EXPECT_TRUE(at::equal(data->y, tiny_y())) << data->y;
  // An explicit, larger feature count pads with zero columns.
  const auto wide = workloads::load_libsvm(kTiny, 5);
  ASSERT_EQ(wide->x.size(1), 5);
  EXPECT_TRUE(at::equal(wide->x.narrow(1, 0, 3), tiny_x()));
  EXPECT_EQ(wide->x.narrow(1, 3, 2).abs().sum().item<float>(), 0.0f);
}

TEST(Libsvm, MalformedLinesNameFileAndLine) {
  EXPECT_EQ(parse_error("+1 1:1\n2 1:1\n"), "bad.txt:2: expected a label +1, -1, 1 or 0, got \"2\"");
  EXPECT_EQ(parse_error("+1 1:1\n\n# comment\n-1 0:1\n"),
            "bad.txt:4: expected index:value (an integer index >= 1 and a finite number), got \"0:1\"");
  EXPECT_EQ(parse_error("+1 1:abc\n"),
            "bad.txt:1: expected index:value (an integer index >= 1 and a finite number), got \"1:abc\"");
  EXPECT_EQ(parse_error("0 1:1 7\n"),
            "bad.txt:1: expected index:value (an integer index >= 1 and a finite number), got \"7\"");
  EXPECT_EQ(parse_error("0 2:1 2:3\n"), "bad.txt:1: expected ascending indices, got 2 after 2");
  EXPECT_EQ(parse_error("yes 1:1\n"), "bad.txt:1: expected a label +1, -1, 1 or 0, got \"yes\"");
  EXPECT_EQ(parse_error("1 1:1\n0 4:1\n", 3), "bad.txt:2: expected indices <= features (3), got 4");
  EXPECT_EQ(parse_error("# only a comment\n\n"), "bad.txt: expected at least one sample, got none");
  // The file itself, with too few features: its line 3 has index 3.
  try {
    workloads::load_libsvm(kTiny, 2);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), kTiny + ":3: expected indices <= features (2), got 3");
  }
}

TEST(Libsvm, ScenarioFieldsAndErrors) {
  const auto s = runner::parse_scenario(tiny_scenario(kTiny, "full"));
  EXPECT_EQ(workloads::data_settings<workloads::LibsvmSettings>(s.workload.data).samples, 12);
  EXPECT_EQ(workloads::data_settings<workloads::LibsvmSettings>(s.workload.data).features, 3);
  EXPECT_EQ(workloads::settings_of<workloads::LogisticRegressionSpec>(s.workload).batch_size, 0);
  EXPECT_EQ(runner::parse_scenario(s.to_json()).to_json(), s.to_json());  // round trip

  auto expect_error = [](const json& doc, const std::string& message) {
    try {
      runner::parse_scenario(doc);
      ADD_FAILURE() << "no error for " << doc.dump();
    } catch (const runner::ScenarioError& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  auto dir = testing::fresh_dir("libsvm_errors");
  testing::write_file(dir / "bad.libsvm", "+1 1:1\n-1 2:x\n");
  expect_error(tiny_scenario((dir / "bad.libsvm").string(), 4),
               "/workload/libsvm_file: " + (dir / "bad.libsvm").string() +
                   ":2: expected index:value (an integer index >= 1 and a finite number), got \"2:x\"");
  expect_error(tiny_scenario((dir / "missing.libsvm").string(), 4),
               "/workload/libsvm_file: " + (dir / "missing.libsvm").string() + " does not exist");
  // A device or a directory is refused before it is read (/dev/zero would be read forever).
  expect_error(tiny_scenario("/dev/zero", 4),
               "/workload/libsvm_file: /dev/zero is not a regular file (a device, FIFO or socket)");
  expect_error(tiny_scenario(dir.string(), 4), "/workload/libsvm_file: " + dir.string() + " is a directory");
  auto with_samples = tiny_scenario(kTiny, 4);
  with_samples["workload"]["samples"] = 12;
  expect_error(with_samples, "/workload/samples: expected no samples with libsvm_file (the file's lines are the samples)");
  expect_error(tiny_scenario(kTiny, "half"), "/workload/batch_size: expected a positive integer, 0 or \"full\", got string \"half\"");
  expect_error(tiny_scenario(kTiny, -1), "/workload/batch_size: expected an integer >= 0, got -1");
}

// A relative libsvm_file is relative to the scenario file's directory.
TEST(Libsvm, RelativePathResolvesAgainstTheScenarioFile) {
  auto dir = testing::fresh_dir("libsvm_relative");
  std::filesystem::create_directories(dir / "data");
  std::filesystem::copy_file(kTiny, dir / "data" / "tiny.libsvm");
  testing::write_file(dir / "s.json", tiny_scenario("data/tiny.libsvm", 4).dump());
  const auto s = runner::load_scenario(dir / "s.json");
  EXPECT_EQ(std::filesystem::path(workloads::data_settings<workloads::LibsvmSettings>(s.workload.data).libsvm_file), (dir / "data" / "tiny.libsvm").lexically_normal());
  EXPECT_EQ(workloads::data_settings<workloads::LibsvmSettings>(s.workload.data).samples, 12);
}

TEST(Libsvm, RunOnTheFileLearns) {
  for (const char* variant : {"centralized", "decentralized"}) {
    const auto r = runner::run_emulated(runner::parse_scenario(tiny_scenario(kTiny, "full", variant)));
    ASSERT_EQ(r.loss.size(), 40u);
    EXPECT_NEAR(r.loss.front(), std::log(2.0), 1e-6) << variant;  // zero parameters
    EXPECT_LT(r.loss.back(), 0.5 * r.loss.front()) << variant;
    EXPECT_LT(r.final_loss, 0.5 * std::log(2.0)) << variant;
    EXPECT_GE(r.final_accuracy, 11.0 / 12.0) << variant;
  }
}

// Full batch: two runs give identical per-step losses (and the mini-batch run differs).
TEST(FullBatch, RunsAreExactlyReproducible) {
  auto doc = tiny_scenario(kTiny, "full", "centralized");
  doc["workload"]["batch_size"] = 0;  // 0 means full too
  const auto s = runner::parse_scenario(doc);
  const auto a = runner::run_emulated(s), b = runner::run_emulated(s);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.final_loss, b.final_loss);
  // Centralized full-batch SGD is gradient descent on the whole data (equal shards): with
  // this small step the loss decreases at every step.
  for (std::size_t t = 1; t < a.loss.size(); ++t) EXPECT_LT(a.loss[t], a.loss[t - 1]) << t;
}

// The first full-batch step's gradient is X^T (sigmoid(X w + b) - y) / n over the whole
// data (one rank: its shard is everything), at the zero initial parameters and at others.
TEST(FullBatch, GradientIsTheClosedForm) {
  workloads::LogisticRegressionSpec spec;
  spec.batch_size = 0;
  const auto data = workloads::load_libsvm(kTiny, 3);
  auto workload = workloads::make_logistic_regression(spec, data, 9, 0, 1);
  auto params = workload->initial_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].abs().sum().item<float>(), 0.0f);
  const auto x = tiny_x().to(at::kDouble), y = tiny_y().to(at::kDouble);
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      params[0] = at::tensor({0.3f, -0.7f, 0.2f}, at::kFloat);
      params[1] = at::tensor({0.1f}, at::kFloat);
    }
    std::vector<at::Tensor> grads{at::zeros_like(params[0]), at::zeros_like(params[1])};
    const double loss = workload->forward(params);
    workload->backward(params, grads);
    const auto z = at::mv(x, params[0].to(at::kDouble)) + params[1].to(at::kDouble);
    const auto residual = at::sigmoid(z) - y;
    const auto dw = at::mv(x.t(), residual) / 12.0;
    const double expected_loss = (at::softplus(z) - y * z).mean().item<double>();
    EXPECT_NEAR(loss, expected_loss, 1e-6) << round;
    EXPECT_TRUE(at::allclose(grads[0].to(at::kDouble), dw, 1e-6, 1e-7)) << round << grads[0] << dw;
    EXPECT_NEAR(grads[1].item<double>(), residual.mean().item<double>(), 1e-7) << round;
  }
}

}  // namespace
}  // namespace dtsim
