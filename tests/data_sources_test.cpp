// The data sources users bring their own data with (workloads/data_source.hpp): CIFAR-10's
// binary files and torch.save files, on files written here in exactly those formats; the
// training-batch augmentation; the image models on any image source.
#include <gtest/gtest.h>

#include <torch/csrc/jit/serialization/pickle.h>

#include <ATen/CPUGeneratorImpl.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/detail/torch_compat.hpp"
#include "runner/scenario.hpp"
#include "tests/test_util.hpp"
#include "workloads/augment.hpp"
#include "workloads/cifar10.hpp"
#include "workloads/fashion_mnist.hpp"
#include "workloads/image_models.hpp"
#include "workloads/sources/cifar10.hpp"
#include "workloads/sources/fashion_mnist.hpp"
#include "workloads/tensor_file.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim {
namespace {

namespace fs = std::filesystem;
using workloads::Cifar10;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// Record r of file f: label (f + r) % 10, pixel bytes (f * 7 + r * 3 + i) % 256.
std::vector<std::uint8_t> cifar_records(int file, int records) {
  std::vector<std::uint8_t> bytes;
  for (int r = 0; r < records; ++r) {
    bytes.push_back(static_cast<std::uint8_t>((file + r) % 10));
    for (int i = 0; i < 3072; ++i) bytes.push_back(static_cast<std::uint8_t>((file * 7 + r * 3 + i) % 256));
  }
  return bytes;
}

void write_bytes(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Five training files of 2 records and a test file of 3 (file index 5).
fs::path write_fake_cifar(const std::string& name) {
  const auto dir = testing::fresh_dir(name);
  for (int f = 0; f < 5; ++f) write_bytes(dir / fmt::format("data_batch_{}.bin", f + 1), cifar_records(f, 2));
  write_bytes(dir / "test_batch.bin", cifar_records(5, 3));
  return dir;
}

TEST(Cifar10, ReadsTheBinaryFormatNormalisedPerChannel) {
  const auto dir = write_fake_cifar("cifar");
  const auto data = Cifar10::load(dir.string());
  ASSERT_EQ(data->train_x.sizes(), (std::vector<std::int64_t>{10, 3, 32, 32}));
  ASSERT_EQ(data->test_x.sizes(), (std::vector<std::int64_t>{3, 3, 32, 32}));
  EXPECT_EQ(data->classes, 10);
  for (int n = 0; n < 10; ++n) {
    const int f = n / 2, r = n % 2;
    EXPECT_EQ(data->train_y[n].item<std::int64_t>(), (f + r) % 10);
    // Channel c, row y, column x is byte 1 + c * 1024 + y * 32 + x of the record.
    for (const auto [c, y, x] : {std::array{0, 0, 0}, std::array{1, 5, 7}, std::array{2, 31, 31}}) {
      const int i = c * 1024 + y * 32 + x;
      const double byte = (f * 7 + r * 3 + i) % 256;
      const double expected = (byte / 255.0 - Cifar10::kMean[c]) / Cifar10::kStd[c];
      EXPECT_NEAR(data->train_x[n][c][y][x].item<double>(), expected, 1e-5 * std::max(1.0, std::abs(expected)));
    }
  }
  EXPECT_EQ(data->test_y[2].item<std::int64_t>(), (5 + 2) % 10);
  // The first N over the files in order.
  const auto cut = Cifar10::load(dir.string(), 3, 1);
  EXPECT_EQ(cut->train_x.size(0), 3);
  EXPECT_TRUE(at::equal(cut->train_x, data->train_x.narrow(0, 0, 3)));
  EXPECT_EQ(cut->test_x.size(0), 1);
  EXPECT_NE(error_of([&] { Cifar10::load(dir.string(), 11); }).find("/workload/train_samples: expected 0 (all) to 10, got 11"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Cifar10, MalformedFilesNameTheFileAndOffset) {
  const auto dir = write_fake_cifar("cifar-bad");
  auto truncated = cifar_records(1, 2);
  truncated.resize(truncated.size() + 100);
  write_bytes(dir / "data_batch_2.bin", truncated);
  EXPECT_EQ(error_of([&] { Cifar10::load(dir.string()); }),
            (dir / "data_batch_2.bin").string() + ": truncated record at byte offset 6146 (records are 3073 bytes, the file "
                                                  "has 6246)");
  write_bytes(dir / "data_batch_2.bin", cifar_records(1, 2));
  auto bad_label = cifar_records(2, 2);
  bad_label[3073] = 10;
  write_bytes(dir / "data_batch_3.bin", bad_label);
  EXPECT_EQ(error_of([&] { Cifar10::load(dir.string()); }),
            (dir / "data_batch_3.bin").string() + ": byte offset 3073: expected a label 0..9, got 10");
  write_bytes(dir / "data_batch_3.bin", cifar_records(2, 2));
  fs::remove(dir / "test_batch.bin");
  EXPECT_NE(error_of([&] { Cifar10::load(dir.string()); }).find("test_batch.bin not found; set /workload/data_dir"),
            std::string::npos);
  fs::remove_all(dir);
}

void save_dict(const fs::path& file, const std::vector<std::pair<std::string, at::Tensor>>& items) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, v] : items) dict.insert(k, v);
  const auto bytes = torch::jit::pickle_save(dict);
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(TensorFile, ReadsADictOfSamplesAndLabels) {
  const auto dir = testing::fresh_dir("tensors");
  const auto x = at::rand({12, 5, 6}, at::kDouble), y = at::arange(12, at::kLong).remainder(4);
  const auto tx = at::rand({3, 5, 6}, at::kDouble), ty = at::tensor({0, 6, 1}, at::kLong);
  save_dict(dir / "d.pt", {{"x", x}, {"y", y}, {"test_x", tx}, {"test_y", ty}});
  const auto data = workloads::read_tensor_file((dir / "d.pt").string());
  EXPECT_EQ(data->train_x.sizes(), (std::vector<std::int64_t>{12, 1, 5, 6}));  // one channel added
  EXPECT_EQ(data->train_x.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(data->train_x.squeeze(1), x.to(at::kFloat)));
  EXPECT_TRUE(at::equal(data->train_y, y));
  EXPECT_TRUE(at::equal(data->test_y, ty));
  EXPECT_EQ(data->classes, 7);  // the largest label, 6, plus one
  fs::remove_all(dir);
}

// tests/data/tiny_tensors.pt was written by Python (Debian's python3-torch 1.13,
// tests/data/README.md): torch.save of x = torch.rand(6, 1, 3, 3) from a generator
// seeded 0, y = [0, 1, 2, 1, 0, 2], test_x = x[:2], test_y = y[:2]. Read with
// pickle_load: the shapes, the labels and the test split are x's first rows.
TEST(TensorFile, ReadsAFileWrittenByPythonsTorchSave) {
  const auto data =
      workloads::read_tensor_file((fs::path(DTSIM_SOURCE_DIR) / "tests" / "data" / "tiny_tensors.pt").string());
  EXPECT_EQ(data->train_x.sizes(), (std::vector<std::int64_t>{6, 1, 3, 3}));
  EXPECT_TRUE(at::equal(data->train_y, at::tensor({0, 1, 2, 1, 0, 2}, at::kLong)));
  EXPECT_TRUE(at::equal(data->test_x, data->train_x.narrow(0, 0, 2)));
  EXPECT_TRUE(at::equal(data->test_y, data->train_y.narrow(0, 0, 2)));
  EXPECT_EQ(data->classes, 3);
  EXPECT_GE(data->train_x.min().item<double>(), 0.0);  // torch.rand: [0, 1)
  EXPECT_LT(data->train_x.max().item<double>(), 1.0);
}

TEST(TensorFile, MalformedFilesAreOneLineErrorsNamingTheFile) {
  const auto dir = testing::fresh_dir("tensors-bad");
  const auto file = (dir / "d.pt").string();
  auto error = [&] {
    const auto e = error_of([&] { workloads::read_tensor_file(file); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_EQ(e.rfind(file + ":", 0), 0u) << e;
    return e;
  };
  save_dict(dir / "d.pt", {{"x", at::rand({4, 2, 2})}});
  EXPECT_NE(error().find("expected tensors \"x\" and \"y\""), std::string::npos);
  save_dict(dir / "d.pt", {{"x", at::rand({4, 2, 2})}, {"y", at::rand({4})}});
  EXPECT_NE(error().find("expected \"y\" of 4 int64 labels, got Float 4"), std::string::npos);
  save_dict(dir / "d.pt", {{"x", at::rand({4, 2})}, {"y", at::zeros({4}, at::kLong)}});
  EXPECT_NE(error().find("expected \"x\" of floating samples"), std::string::npos);
  save_dict(dir / "d.pt", {{"x", at::rand({4, 2, 2})}, {"y", at::zeros({4}, at::kLong)}, {"test_x", at::rand({1, 2, 2})}});
  EXPECT_NE(error().find("expected both \"test_x\" and \"test_y\""), std::string::npos);
  {
    const auto bytes = torch::jit::pickle_save(at::rand({4}));
    std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_NE(error().find("expected a dict of tensors"), std::string::npos);
  testing::write_file(file, "not a torch file at all");
  EXPECT_NE(error().find("expected a file written by torch.save"), std::string::npos);
  // Python's file with one byte of a string's length raised to claim 4 GB, and with a memo
  // index of 376 million (LibTorch's unpickler would allocate for either and take seconds):
  // refused before the unpickler runs, naming the offset in data.pkl.
  const auto corpus = fs::path(DTSIM_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "tensors";
  fs::copy_file(corpus / "string-length-4GiB.pt", file, fs::copy_options::overwrite_existing);
  EXPECT_NE(error().find("data.pkl offset 272: an opcode claims 4261412865 bytes"), std::string::npos);
  fs::copy_file(corpus / "memo-index-376M.pt", file, fs::copy_options::overwrite_existing);
  EXPECT_NE(error().find("memo index 376525428 after 22 entries"), std::string::npos);
  // A tensor whose sizes reach past its stored data: refused by dtsim's check, or by
  // LibTorch's unpickler before it where that checks (2.x: kernels/detail/torch_compat.hpp).
  fs::copy_file(corpus / "tensor-beyond-its-storage.pt", file, fs::copy_options::overwrite_existing);
  if (kernels::detail::kUnpicklerChecksTensorStorage)
    EXPECT_NE(error().find("got one it cannot read (Tensor: sizes 4, strides 1, storage offset 0 and itemsize 8 require "
                           "a storage of at least 32 bytes, but storage only has 0 bytes)"),
              std::string::npos)
        << error();
  else
    EXPECT_NE(error().find("claims 4 elements (4) that its stored data does not hold"), std::string::npos) << error();
  fs::remove_all(dir);
}

// Every augmented image is one of the 9 x 9 windows of its 4-pixel-padded self, flipped or
// not; the draws are reproducible, and over many images every offset occurs and about
// half are flipped (binomial, within 5 standard deviations).
TEST(Augment, RandomCropOfThePaddedImageAndFlip) {
  const std::int64_t batch = 2000;
  const auto x = at::rand({batch, 2, 6, 5});
  auto gen = at::detail::createCPUGenerator(11);
  const auto out = workloads::augment_batch(x, gen);
  auto again_gen = at::detail::createCPUGenerator(11);
  EXPECT_TRUE(at::equal(workloads::augment_batch(x, again_gen), out));
  const auto padded = at::constant_pad_nd(x, {4, 4, 4, 4}, 0.0);
  std::int64_t flipped = 0;
  std::set<std::pair<int, int>> offsets;
  for (std::int64_t i = 0; i < 200; ++i) {
    int matches = 0;
    for (int oy = 0; oy <= 8; ++oy)
      for (int ox = 0; ox <= 8; ++ox)
        for (int flip = 0; flip < 2; ++flip) {
          auto w = padded[i].narrow(1, oy, 6).narrow(2, ox, 5);
          if (flip) w = w.flip({2});
          if (at::equal(w, out[i])) {
            ++matches;
            flipped += flip;
            offsets.insert({oy, ox});
          }
        }
    EXPECT_EQ(matches, 1) << i;
  }
  EXPECT_GT(offsets.size(), 60u);  // of 81, from 200 draws
  // The flips of all 2000: recount from the draws' own stream.
  auto flips_gen = at::detail::createCPUGenerator(11);
  at::randint(0, 9, {batch, 2}, flips_gen, at::kLong);
  const double heads = at::randint(0, 2, {batch}, flips_gen, at::kLong).sum().item<double>();
  EXPECT_LT(std::abs(heads - batch / 2.0), 5 * std::sqrt(batch / 4.0));
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
}

// The image models take any image source's shape and classes: on CIFAR-10's 3 x 32 x 32,
// the MLP has 3072 x 256 + 256 + 256 x 128 + 128 + 128 x 10 + 10 parameters, the CNN's
// first layer 3 input channels and its fc1 32 x 8 x 8 inputs; both learn (30 augmented
// steps lower the training loss on fake images whose brightness is their label).
TEST(ImageModels, TakeTheSourcesShapeAndClasses) {
  // A learnable fake set: 40 images whose brightness is their label (0..3), per file.
  const auto dir = testing::fresh_dir("cifar-models");
  for (int f = 0; f < 6; ++f) {
    std::vector<std::uint8_t> bytes;
    for (int r = 0; r < 8; ++r) {
      const int label = (f + r) % 4;
      bytes.push_back(static_cast<std::uint8_t>(label));
      for (int i = 0; i < 3072; ++i) bytes.push_back(static_cast<std::uint8_t>(40 + 50 * label + (i * 13 + r) % 17));
    }
    write_bytes(dir / (f < 5 ? fmt::format("data_batch_{}.bin", f + 1) : std::string("test_batch.bin")), bytes);
  }
  for (const std::string type : {"mlp", "cnn"}) {
    SCOPED_TRACE(type);
    const nlohmann::json doc = {{"ranks", 2},
                                {"steps", 1},
                                {"workload", {{"type", type}, {"data", "cifar10"}, {"data_dir", dir.string()}, {"batch_size", 4}}},
                                {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.05}}},
                                {"topology", {{"kind", "ring"}}},
                                {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}};
    const auto s = runner::parse_scenario(doc);
    EXPECT_EQ(s.workload.data.source, "cifar10");
    EXPECT_TRUE(workloads::data_settings<workloads::Cifar10Settings>(s.workload.data).augment);
    const auto data = workloads::load_workload_data(s.workload, 1);
    const auto w = workloads::make_workload(s.workload, data, 1, 0, 2);
    const auto params = w->initial_parameters();
    std::int64_t n = 0;
    for (const auto& p : params) n += p.numel();
    if (type == "mlp") {
      EXPECT_EQ(n, 3072 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
    } else {
      EXPECT_EQ(params[0].sizes(), (std::vector<std::int64_t>{16, 3, 3, 3}));
      EXPECT_EQ(params[4].size(1), 32 * 8 * 8);
    }
    EXPECT_EQ(params.back().numel(), 10);
    const auto before = w->evaluate(params).loss;
    std::vector<at::Tensor> grads;
    for (const auto& p : params) grads.push_back(at::zeros_like(p));
    auto trained = params;
    const double lr = type == "mlp" ? 0.005 : 0.02;
    for (int step = 0; step < 30; ++step) {
      w->forward(trained);
      w->backward(trained, grads);
      for (std::size_t i = 0; i < trained.size(); ++i) trained[i] = trained[i] - lr * grads[i];
    }
    EXPECT_LT(w->evaluate(trained).loss, before);
  }
  fs::remove_all(dir);
}

// Fashion-MNIST padded to 32 x 32 for the 32 x 32 models: the stored image in the middle,
// two rows and columns of the normalised black pixel around it.
TEST(FashionMnistSource, PaddedTo32x32) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz") && !fs::exists(fs::path(dir) / "train-images-idx3-ubyte"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  workloads::WorkloadSpec spec;
  spec.type = "mlp";
  spec.data.source = "fashion_mnist";
  workloads::FashionMnistSettings set;
  set.files.train_samples = 50;
  set.files.test_samples = 10;
  spec.data.settings = set;
  const auto plain = workloads::load_data_source(spec.data, 1);
  set.image_size = 32;
  spec.data.settings = set;
  const auto padded = workloads::load_data_source(spec.data, 1);
  ASSERT_EQ(padded->train_x.sizes(), (std::vector<std::int64_t>{50, 1, 32, 32}));
  ASSERT_EQ(padded->test_x.sizes(), (std::vector<std::int64_t>{10, 1, 32, 32}));
  EXPECT_TRUE(at::equal(padded->train_x.narrow(2, 2, 28).narrow(3, 2, 28), plain->train_x));
  const float background = static_cast<float>((0.0 - workloads::FashionMnist::kMean) / workloads::FashionMnist::kStd);
  EXPECT_TRUE((padded->train_x.narrow(2, 0, 2) == background).all().item<bool>());
  EXPECT_TRUE((padded->train_x.narrow(3, 30, 2) == background).all().item<bool>());
  EXPECT_TRUE(at::equal(padded->train_y, plain->train_y));
  // The models follow the source's shape: the MLP's first layer takes 32 x 32 inputs.
  EXPECT_EQ(workloads::make_workload(spec, workloads::load_workload_data(spec, 1), 1, 0, 1)->initial_parameters()[0].size(1),
            1024);
}

}  // namespace
}  // namespace dtsim
