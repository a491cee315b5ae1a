// VGG-11 with BatchNorm (workloads/vgg11_model.hpp) on the autograd module workload: its
// parameters against the closed form and its cost table, and one training step, direct
// and through the runner.
#include <gtest/gtest.h>

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/module.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "tests/test_util.hpp"
#include "workloads/shape_models.hpp"
#include "workloads/vgg11_model.hpp"

namespace dtsim {
namespace {

using nlohmann::json;

std::shared_ptr<const workloads::LabelledData> random_images(std::int64_t n, std::int64_t channels, std::uint64_t seed) {
  auto data = std::make_shared<workloads::LabelledData>();
  auto gen = at::detail::createCPUGenerator(seed);
  data->train_x = at::randn({n, channels, 32, 32}, gen, at::kFloat);
  data->train_y = at::arange(n, at::kLong).remainder(10);
  data->classes = 10;
  return data;
}

// By hand: eight 3x3 convs with biases, (9 Cin + 1) Cout each, and their BatchNorms, 2 Cout;
// the classifier 512 x 512 + 512 twice and 512 x classes + classes. 38 tensors, named as the
// reference's nn.Sequential indices, with the cost table's names and shapes in its order.
TEST(Vgg11Real, ParametersAreTheClosedForm) {
  for (const std::int64_t channels : {3, 1}) {
    const std::int64_t classes = channels == 3 ? 10 : 7;
    std::int64_t expected = 0, in = channels;
    for (const std::int64_t out : {64, 128, 256, 256, 512, 512, 512, 512}) {
      expected += (9 * in + 1) * out + 2 * out;
      in = out;
    }
    expected += 2 * (512 * 512 + 512) + 512 * classes + classes;
    const auto model = workloads::make_vgg11_model(channels, classes, 1);
    const auto params = model.module.ptr()->named_parameters();
    ASSERT_EQ(params.size(), 38u);
    std::vector<workloads::TensorShape> table;
    for (const auto& layer : model.layers) table.insert(table.end(), layer.tensors.begin(), layer.tensors.end());
    ASSERT_EQ(table.size(), params.size());
    std::int64_t total = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i].key(), table[i].name) << i;
      EXPECT_EQ(params[i].value().sizes(), at::IntArrayRef(table[i].shape)) << table[i].name;
      total += params[i].value().numel();
    }
    EXPECT_EQ(total, expected);
    if (channels == 3) {
      EXPECT_EQ(total, 9756426);
    }
    EXPECT_EQ(params[0].key(), "features.0.weight");
    EXPECT_EQ(params[2].key(), "features.1.weight");  // BatchNorm
    EXPECT_EQ(params[31].key(), "features.26.bias");
    EXPECT_EQ(params.back().key(), "classifier.6.bias");
  }
}

// One step at batch 4: the loss starts near ln 10, every parameter gets a non-zero
// gradient, in autograd's order (a permutation, the classifier's first), and an SGD step
// on that gradient lowers the loss of the same batch (dropout off: eval-mode loss).
TEST(Vgg11Real, OneTrainingStep) {
  const auto data = random_images(4, 3, 3);
  auto w = workloads::make_vgg11_workload(data, 4, "iid", 2, 0, 1);
  auto params = w->initial_parameters();
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(at::full_like(p, 99.0));
  const double loss = w->forward(params);
  EXPECT_NEAR(loss, std::log(10.0), 1.0);
  w->backward(params, grads);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    EXPECT_GT(grads[i].abs().sum().item<double>(), 0.0) << i;
    EXPECT_LT(grads[i].abs().max().item<double>(), 99.0) << i;  // overwritten
  }
  auto order = w->ready_order();
  EXPECT_EQ(w->parameter_names()[order.front()], "classifier.6.bias");
  std::sort(order.begin(), order.end());
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(w->cost_source(), "table");
  EXPECT_DOUBLE_EQ(w->backward_cost().flops, 2.0 * w->forward_cost().flops);

  const double before = w->evaluate(params).loss;
  for (std::size_t i = 0; i < params.size(); ++i) params[i].sub_(0.01 * grads[i]);
  EXPECT_LT(w->evaluate(params).loss, before);
}

// Through the runner: a scenario on a tensors file of 8 images, two ranks, one step of
// centralized SGD: the loss is finite and the echo round-trips.
TEST(Vgg11Real, OneStepThroughTheRunner) {
  const auto dir = testing::fresh_dir("vgg11-real");
  const auto file = (dir / "images.pt").string();
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  dict.insert("x", at::randn({8, 3, 32, 32}, at::detail::createCPUGenerator(4)));
  dict.insert("y", at::arange(8, at::kLong).remainder(10));
  const auto bytes = torch::jit::pickle_save(dict);
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const json doc = {{"name", "vgg11"},
                    {"ranks", 2},
                    {"steps", 1},
                    {"workload", {{"type", "vgg11_real"}, {"tensors_file", file}, {"batch_size", 4}}},
                    {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.05}}},
                    {"topology", {{"kind", "ring"}}},
                    {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}};
  const auto s = runner::parse_scenario(doc);
  EXPECT_EQ(runner::parse_scenario(s.to_json()).to_json(), s.to_json());
  const auto r = runner::run_emulated(s);
  ASSERT_EQ(r.loss.size(), 1u);
  EXPECT_TRUE(std::isfinite(r.loss[0]));
  EXPECT_TRUE(std::isfinite(r.final_loss));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtsim
