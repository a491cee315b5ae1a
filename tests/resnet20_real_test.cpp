// The real ResNet-20 (workloads/resnet20_model.hpp) and the autograd module workload
// under it (workloads/module_workload.hpp): its tensors and gradient ready order against
// the shape model resnet20's, its gradients against a functional ResNet-20 written here
// (double precision, itself checked by finite differences), BatchNorm statistics that
// stay with their rank, the scenario's checks, and runs through the runner (parallel SGD
// learns; SINGA's DistOpt, which drives the backward pass stage by stage, gives the same
// losses as parallel SGD).
#include <gtest/gtest.h>

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/module.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "tests/test_util.hpp"
#include "workloads/resnet20_model.hpp"
#include "workloads/shape_models.hpp"
#include "workloads/sources/fashion_mnist.hpp"
#include "workloads/vgg11_model.hpp"

namespace dtsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using workloads::LabelledData;

// `n` random C x 32 x 32 images in 10 classes (labels n % 10), no test split.
std::shared_ptr<const LabelledData> random_images(std::int64_t n, std::int64_t channels, std::uint64_t seed) {
  auto data = std::make_shared<LabelledData>();
  auto gen = at::detail::createCPUGenerator(seed);
  data->train_x = at::randn({n, channels, 32, 32}, gen, at::kFloat);
  data->train_y = at::arange(n, at::kLong).remainder(10);
  data->classes = 10;
  return data;
}

std::vector<std::string> names_of(const std::vector<workloads::TensorShape>& tensors) {
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back(t.name);
  return names;
}

// The model's parameter tensors are the shape model's: 59 tensors, 269,722 parameters,
// the same names and shapes in the same (forward) order; a 1-channel source only changes
// conv1's input channels.
TEST(ResNet20Real, TensorsAreTheShapeModels) {
  auto expected = workloads::shape_model_tensors("resnet20");  // backward order
  std::reverse(expected.begin(), expected.end());
  const auto model = workloads::make_resnet20_model(3, 10, 1);
  const auto params = model.module.ptr()->named_parameters();
  ASSERT_EQ(params.size(), 59u);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].key(), expected[i].name) << i;
    EXPECT_EQ(params[i].value().sizes(), at::IntArrayRef(expected[i].shape)) << expected[i].name;
    total += params[i].value().numel();
  }
  EXPECT_EQ(total, 269722);
  // Buffers: BatchNorm's running mean, variance and batch count, 19 BatchNorms.
  EXPECT_EQ(model.module.ptr()->buffers().size(), 3u * 19u);

  const auto gray = workloads::make_resnet20_model(1, 10, 1).module.ptr()->named_parameters();
  EXPECT_EQ(gray["conv1.weight"].sizes(), (std::vector<std::int64_t>{16, 1, 3, 3}));
  std::int64_t gray_total = 0;
  for (const auto& p : gray) gray_total += p.value().numel();
  EXPECT_EQ(gray_total, 269722 - 2 * 16 * 9);
}

// Seeded initialisation: the same seed gives the same parameters, another seed others;
// BatchNorm starts at weight 1, bias 0; conv weights have the Kaiming-normal spread.
TEST(ResNet20Real, InitialisationIsSeeded) {
  const auto a = workloads::make_resnet20_workload(random_images(8, 3, 1), 4, "iid", 7, 0, 2)->initial_parameters();
  const auto b = workloads::make_resnet20_workload(random_images(8, 3, 2), 4, "iid", 7, 1, 2)->initial_parameters();
  const auto c = workloads::make_resnet20_workload(random_images(8, 3, 1), 4, "iid", 8, 0, 2)->initial_parameters();
  ASSERT_EQ(a.size(), 59u);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << i;  // every rank
  EXPECT_FALSE(at::equal(a[0], c[0]));
  EXPECT_TRUE(at::equal(a[1], at::ones({16})));
  EXPECT_TRUE(at::equal(a[2], at::zeros({16})));
  // layer3's 3x3 convs: 36,864 draws of N(0, 2 / (9 * 64)).
  const auto w = a[51];
  ASSERT_EQ(w.sizes(), (std::vector<std::int64_t>{64, 64, 3, 3}));
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / (9 * 64)), 0.02 * std::sqrt(2.0 / (9 * 64)));
}

// The must-show: the ready order and count of the real model's gradients equal the
// built-in ResNet-20's. Autograd makes them ready layer by layer in exactly the shape
// model's backward order, stage for stage (one layer per stage, same costs); within a
// BatchNorm it hands out the weight before the bias (both come from one backward node),
// where the shape model lists the bias first (plain reverse state_dict order). Weight and
// bias have the same size, so the sizes in ready order, which is all a partitioner such as
// DistOpt's sees, are the shape model's exactly.
TEST(ResNet20Real, GradientReadyOrderIsTheShapeModels) {
  const auto w = workloads::make_resnet20_workload(random_images(8, 3, 1), 4, "iid", 7, 0, 1);
  const auto names = w->parameter_names();
  const auto shape_backward = workloads::shape_model_tensors("resnet20");
  const auto& order = w->ready_order();
  ASSERT_EQ(order.size(), shape_backward.size());
  std::vector<std::string> ready;
  for (auto i : order) ready.push_back(names[i]);
  auto expected = names_of(shape_backward);
  for (std::size_t i = 0; i + 1 < expected.size(); ++i)
    if (expected[i].ends_with(".bias") && expected[i].find("bn") != std::string::npos) std::swap(expected[i], expected[i + 1]), ++i;
  EXPECT_EQ(ready, expected);
  EXPECT_EQ(ready.front(), "fc.bias");
  EXPECT_EQ(ready[2], "layer3.2.bn2.weight");
  EXPECT_EQ(ready.back(), "conv1.weight");
  const auto initial = w->initial_parameters();
  for (std::size_t n = 0; n < order.size(); ++n) EXPECT_EQ(initial[order[n]].numel(), shape_backward[n].numel()) << n;

  // Stage for stage: the shape workload's parameters (as sets) and costs at the same batch.
  const auto shape =
      workloads::make_shape_workload("resnet20", 4, 128, workloads::make_shape_pool(1), 7, 0)->backward_stages();
  const auto stages = w->backward_stages();
  ASSERT_EQ(stages.size(), shape.size());
  ASSERT_EQ(stages.size(), 39u);  // 19 convs, 19 BatchNorms, fc
  for (std::size_t k = 0; k < stages.size(); ++k) {
    auto a = stages[k].params, b = shape[k].params;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b) << k;
    EXPECT_EQ(stages[k].cost.flops, shape[k].cost.flops) << k;
    EXPECT_EQ(stages[k].cost.bytes, shape[k].cost.bytes) << k;
  }
  const auto shape_w = workloads::make_shape_workload("resnet20", 4, 128, workloads::make_shape_pool(1), 7, 0);
  EXPECT_EQ(w->forward_cost().flops, shape_w->forward_cost().flops);
  EXPECT_DOUBLE_EQ(w->backward_cost().flops, 2.0 * w->forward_cost().flops);
}

// An independent ResNet-20 as plain functions of its parameters (forward order), in the
// parameters' dtype: batch statistics as in training, option-A shortcuts by concatenating
// zero channels.
at::Tensor reference_logits(const std::vector<at::Tensor>& p, const at::Tensor& x) {
  std::size_t i = 0;
  auto conv = [&](const at::Tensor& h, std::int64_t stride) { return at::conv2d(h, p[i++], {}, stride, 1); };
  auto bn = [&](const at::Tensor& h) {
    const auto& weight = p[i++];
    const auto& bias = p[i++];
    const auto mean = h.mean({0, 2, 3}, true);
    const auto var = (h - mean).pow(2).mean({0, 2, 3}, true);  // biased, as BatchNorm normalises
    return (h - mean) / (var + 1e-5).sqrt() * weight.view({1, -1, 1, 1}) + bias.view({1, -1, 1, 1});
  };
  auto h = at::relu(bn(conv(x, 1)));
  for (int stage = 0; stage < 3; ++stage)
    for (int block = 0; block < 3; ++block) {
      const std::int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      auto y = bn(conv(at::relu(bn(conv(h, stride))), 1));
      at::Tensor shortcut = h;
      if (stride == 2) {
        const auto sub = h.index_select(2, at::arange(0, h.size(2), 2, at::kLong))
                             .index_select(3, at::arange(0, h.size(3), 2, at::kLong));
        const auto zeros = at::zeros({sub.size(0), sub.size(1) / 2, sub.size(2), sub.size(3)}, sub.options());
        shortcut = at::cat({zeros, sub, zeros}, 1);
      }
      h = at::relu(y + shortcut);
    }
  const auto pooled = h.sum({2, 3}) / static_cast<double>(h.size(2) * h.size(3));
  return at::linear(pooled, p[i], p[i + 1]);
}

double reference_loss(const std::vector<at::Tensor>& p, const at::Tensor& x, const at::Tensor& y) {
  return at::nll_loss(at::log_softmax(reference_logits(p, x), 1), y).item<double>();
}

// One rank whose batch is its whole shard: the loss (a mean) and BatchNorm's batch
// statistics do not depend on the batch's order, so the workload's loss and gradients are
// the reference's on the whole set. Parameters are perturbed first so that BatchNorm's
// weights and biases are not 1 and 0.
//
// Given double parameters the workload computes in double: its loss and gradients are
// the reference's to rounding, and central differences of the loss agree at a few
// coordinates. The step is 1e-7 because the loss is piecewise smooth: at 1e-5, a few of
// the ~600,000 ReLU inputs cross zero within the step and move the early layers'
// differences by a few percent (conv1.weight: 0.00571 against 0.00596 at 1e-7); rounding
// noise at 1e-7 is ~1e-9. The same ReLU sensitivity makes fp32 against double agree only
// to about 1e-2 per tensor (a fp32 rounding of ~1e-5 after 20 layers flips a few ReLUs),
// so the fp32 run is checked against the reference in L2 norm per tensor.
TEST(ResNet20Real, GradientsMatchAnIndependentAutogradComputation) {
  const auto data = random_images(6, 3, 11);
  auto w = workloads::make_resnet20_workload(data, 6, "iid", 3, 0, 1);
  auto params = w->initial_parameters();
  auto gen = at::detail::createCPUGenerator(5);
  for (auto& p : params) p.add_(at::randn(p.sizes(), gen, at::kFloat).mul_(0.1));
  const auto names = w->parameter_names();
  const auto y = data->train_y;

  std::vector<at::Tensor> ref_params;
  for (const auto& p : params) ref_params.push_back(p.to(at::kDouble).requires_grad_());
  const auto x = data->train_x.to(at::kDouble);
  const auto ref = at::nll_loss(at::log_softmax(reference_logits(ref_params, x), 1), y);
  ref.backward();

  auto run = [&](const std::vector<at::Tensor>& p) {
    std::vector<at::Tensor> grads;
    for (const auto& t : p) grads.push_back(at::full_like(t, 99.0));  // every entry is overwritten
    const double loss = w->forward(p);
    w->backward(p, grads);
    return std::pair{loss, grads};
  };
  std::vector<at::Tensor> double_params;
  for (const auto& p : params) double_params.push_back(p.to(at::kDouble));
  const auto [loss64, grads64] = run(double_params);
  EXPECT_NEAR(loss64, ref.item<double>(), 1e-12 * ref.item<double>());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto expected = ref_params[i].grad();
    const double scale = expected.abs().max().item<double>();
    ASSERT_GT(scale, 0.0) << names[i];
    EXPECT_LT((grads64[i] - expected).abs().max().item<double>(), 1e-9 * scale) << names[i];
  }

  std::vector<at::Tensor> probe;
  for (const auto& p : ref_params) probe.push_back(p.detach().clone());
  for (const auto& [name, coordinate] : std::vector<std::pair<std::string, std::int64_t>>{
           {"conv1.weight", 5}, {"layer2.0.bn1.weight", 3}, {"layer3.1.conv2.weight", 1234}, {"fc.bias", 7}}) {
    const auto i = static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
    ASSERT_LT(i, names.size()) << name;
    const double h = 1e-7;
    auto flat = probe[i].view({-1});
    const double x0 = flat[coordinate].item<double>();
    flat[coordinate] = x0 + h;
    const double up = reference_loss(probe, x, y);
    flat[coordinate] = x0 - h;
    const double down = reference_loss(probe, x, y);
    flat[coordinate] = x0;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(grads64[i].view({-1})[coordinate].item<double>(), numeric, 1e-8 + 1e-5 * std::abs(numeric)) << name;
  }

  const auto [loss32, grads32] = run(params);
  EXPECT_NEAR(loss32, ref.item<double>(), 1e-5 * ref.item<double>());
  for (std::size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(grads32[i].scalar_type(), at::kFloat);
    const auto expected = ref_params[i].grad();
    EXPECT_LT((grads32[i].to(at::kDouble) - expected).norm().item<double>(), 2e-2 * expected.norm().item<double>())
        << names[i];
  }
}

std::map<std::string, at::Tensor> buffers_of(const torch::nn::Module& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& b : m.named_buffers()) out[b.key()] = b.value().clone();
  return out;
}

// Two ranks on different shards, the same parameters every step: BatchNorm's running
// statistics move from their start (mean 0, variance 1) and differ between the ranks,
// since nothing synchronises them; the module computes with exactly the algorithm's
// parameters (it copies them, it does not keep its own); evaluation (eval mode) leaves the
// statistics as they were.
TEST(ResNet20Real, BatchNormStatisticsStayWithTheirRank) {
  const auto data = random_images(16, 3, 21);
  std::vector<std::unique_ptr<workloads::ModuleWorkload>> ranks;
  for (int r = 0; r < 2; ++r) ranks.push_back(workloads::make_resnet20_workload(data, 4, "iid", 9, r, 2));
  auto params = ranks[0]->initial_parameters();
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(at::zeros_like(p));
  for (int step = 0; step < 3; ++step) {
    for (auto& p : params) p.mul_(0.99).add_(0.001 * step);  // the algorithm's update, in place
    for (auto& w : ranks) {
      w->forward(params);
      const auto module_params = w->module().parameters();
      for (std::size_t i = 0; i < params.size(); ++i) {
        ASSERT_TRUE(at::equal(module_params[i], params[i])) << i;
        ASSERT_NE(module_params[i].data_ptr(), params[i].data_ptr()) << i;  // a copy, not the algorithm's tensor
      }
      w->backward(params, grads);
      for (std::size_t i = 0; i < grads.size(); ++i) ASSERT_TRUE(at::equal(grads[i], module_params[i].grad())) << i;
    }
  }
  const auto a = buffers_of(ranks[0]->module()), b = buffers_of(ranks[1]->module());
  for (const char* name : {"bn1.running_mean", "bn1.running_var", "layer3.2.bn2.running_mean"}) {
    EXPECT_FALSE(at::allclose(a.at(name), b.at(name))) << name;
    EXPECT_FALSE(at::allclose(a.at(name), std::string(name).ends_with("mean") ? at::zeros({1}) : at::ones({1}))) << name;
  }
  EXPECT_EQ(a.at("bn1.num_batches_tracked").item<std::int64_t>(), 3);
  const auto e = ranks[0]->evaluate(params);
  EXPECT_GT(e.loss, 0.0);
  EXPECT_FALSE(ranks[0]->evaluate_test(params).has_value());
  for (const auto& [name, value] : buffers_of(ranks[0]->module())) EXPECT_TRUE(at::equal(value, a.at(name))) << name;
  EXPECT_TRUE(ranks[0]->module().is_training());
}

// --- scenarios and runs -----------------------------------------------------------------

std::string scenario_error(const json& doc) {
  try {
    runner::parse_scenario(doc);
  } catch (const runner::ScenarioError& e) {
    return e.what();
  }
  return "no error";
}

json scenario(const json& workload, const json& algorithm, int ranks = 2, int steps = 30) {
  return json{{"name", "resnet20_real"},
              {"ranks", ranks},
              {"steps", steps},
              {"seed", 4},
              {"workload", workload},
              {"algorithm", algorithm},
              {"topology", {{"kind", "ring"}}},
              {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}};
}

// Fashion-MNIST trains only padded to 32 x 32 (the type's default for it); asking for
// 28 x 28 is one line at the field, as are other sources' images of another size.
TEST(ResNet20Real, ScenarioRefusesImagesOtherThan32Pixels) {
  const json sgd = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}};
  EXPECT_EQ(workloads::data_settings<workloads::FashionMnistSettings>(runner::parse_scenario(scenario({{"type", "resnet20_real"}, {"data", "fashion_mnist"}}, sgd)).workload.data)
                .image_size,
            32);
  EXPECT_EQ(scenario_error(scenario({{"type", "resnet20_real"}, {"data", "fashion_mnist"}, {"image_size", 28}}, sgd)),
            "/workload/image_size: expected 32 for resnet20_real (a 32 x 32 model), got 28");
  const auto s = runner::parse_scenario(
      scenario({{"type", "resnet20_real"}, {"data", "fashion_mnist"}, {"image_size", 32}, {"batch_size", 8}}, sgd));
  EXPECT_EQ(workloads::data_settings<workloads::FashionMnistSettings>(s.workload.data).image_size, 32);
  EXPECT_EQ(runner::parse_scenario(s.to_json()).to_json(), s.to_json());  // round trip
  EXPECT_NE(scenario_error(scenario({{"type", "resnet20_real"}, {"data", "synthetic"}}, sgd)).find("/workload/data"),
            std::string::npos);

  const auto dir = testing::fresh_dir("resnet20-real-tensors");
  const auto file = (dir / "small.pt").string();
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  dict.insert("x", at::rand({4, 3, 28, 28}));
  dict.insert("y", at::arange(4, at::kLong).remainder(2));
  const auto bytes = torch::jit::pickle_save(dict);
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_EQ(scenario_error(scenario({{"type", "resnet20_real"}, {"tensors_file", file}}, sgd)),
            "/workload/tensors_file: expected C x 32 x 32 images for resnet20_real, the data has samples of 3 x 28 x 28");
  std::filesystem::remove_all(dir);

  // Data handed to the model directly (not through a scenario) is checked too.
  auto small = std::make_shared<LabelledData>();
  small->train_x = at::zeros({2, 1, 28, 28});
  small->train_y = at::zeros({2}, at::kLong);
  small->classes = 10;
  const auto refusal = [&](auto make) {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(refusal([&] { workloads::make_resnet20_workload(small, 2, "iid", 1, 0, 1); }),
            "resnet20_real: expected C x 32 x 32 images, got samples of 1 x 28 x 28");
  EXPECT_EQ(refusal([&] { workloads::make_vgg11_workload(small, 2, "iid", 1, 0, 1); }),
            "vgg11_real: expected C x 32 x 32 images, got samples of 1 x 28 x 28");
}

// Five training files of 8 records and a test file of 4, in CIFAR-10's binary format
// (label byte, then 3,072 pixel bytes): labels (file + record) % 10, pixels a pattern that
// differs per record.
fs::path write_fake_cifar(const std::string& name) {
  const auto dir = testing::fresh_dir(name);
  for (int f = 0; f < 6; ++f) {
    std::string bytes;
    const int records = f < 5 ? 8 : 4;
    for (int r = 0; r < records; ++r) {
      bytes.push_back(static_cast<char>((f + r) % 10));
      for (int i = 0; i < 3072; ++i) bytes.push_back(static_cast<char>((f * 7 + r * 3 + i * (1 + (f + r) % 10)) % 256));
    }
    const auto file = f < 5 ? fmt::format("data_batch_{}.bin", f + 1) : std::string("test_batch.bin");
    std::ofstream(dir / file, std::ios::binary) << bytes;
  }
  return dir;
}

double mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to), 0.0) /
         static_cast<double>(to - from);
}

// 2 ranks x 20 images (batch 10), 30 steps of centralized parallel SGD with momentum on
// fake CIFAR-10: the training loss falls well below its start, near ln 10. Then SINGA's
// DistOpt (sync), whose step runs the backward stages one by one and all-reduces fused
// groups as they become ready, gives parallel SGD's losses exactly (its sums are the
// same), in several all-reduces per step.
TEST(ResNet20RealRuns, ParallelSgdLearnsAndDistOptMatchesIt) {
  const auto dir = write_fake_cifar("resnet20-real-cifar");
  const json workload = {{"type", "resnet20_real"}, {"data_dir", dir.string()}, {"batch_size", 10}, {"augment", false}};
  const json optimizer = {{"lr", 0.05}, {"momentum", 0.9}, {"weight_decay", 1e-4}};
  json sgd = {{"name", "parallel_sgd"}, {"variant", "centralized"}};
  json distopt = {{"name", "distopt"}, {"variant", "sync"}, {"threshold", 4096}, {"buffer_size", 65536}};
  for (const auto& [k, v] : optimizer.items()) sgd[k] = distopt[k] = v;

  const auto s = runner::parse_scenario(scenario(workload, sgd));
  EXPECT_EQ(s.workload.data.source, "cifar10");  // the type's default
  const auto a = runner::run_emulated(s);
  ASSERT_EQ(a.loss.size(), 30u);
  EXPECT_NEAR(mean(a.loss, 0, 3), std::log(10.0), 1.0);
  EXPECT_LT(mean(a.loss, 25, 30), 0.5 * mean(a.loss, 0, 5));
  EXPECT_TRUE(std::isfinite(a.final_test_loss));

  const auto b = runner::run_emulated(runner::parse_scenario(scenario(workload, distopt)));
  EXPECT_EQ(b.loss, a.loss);
  EXPECT_EQ(b.final_loss, a.final_loss);
  EXPECT_GT(b.mean_calls(), 2.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dtsim
