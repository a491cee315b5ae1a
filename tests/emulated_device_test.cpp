// The scenario's "device": where every emulated rank's tensors live (parameters,
// gradients, data, the algorithm's state). On any machine: "device": "cpu" is the
// default, bit for bit, and "cuda" without a CUDA LibTorch or a visible device is a
// one-line error at /device. On a GPU machine (the EmulatedDeviceCuda cases, skipped
// elsewhere): runs on the GPU follow the CPU runs to a stated tolerance, and every
// algorithm runs there with the same message sizes.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>

#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "test_util.hpp"

namespace dtsim::runner {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json scenario_file(const std::string& name) {
  return testing::read_json(fs::path(DTSIM_SOURCE_DIR) / "scenarios" / (name + ".json"));
}

json with_device(json doc, const char* device) {
  doc["device"] = device;
  return doc;
}

// A run's result and every rank's final parameters, flattened.
struct RunOutput {
  RunResult result;
  std::vector<std::vector<double>> params;  // [rank][element]
};

RunOutput run_with_params(const json& doc, const std::string& tag) {
  const auto dir = testing::fresh_dir("device-" + tag);
  RunOptions options;
  options.dump_params_prefix = dir / "params";
  RunOutput out{run_emulated(parse_scenario(doc), options), {}};
  for (int r = 0; r < out.result.scenario.ranks; ++r) {
    const json dump = testing::read_json(dir / ("params.rank" + std::to_string(r) + ".json"));
    std::vector<double> flat;
    for (const auto& [name, values] : dump["params"].items())
      for (double v : values) flat.push_back(v);
    out.params.push_back(flat);
  }
  fs::remove_all(dir);
  return out;
}

// --- Every machine ---------------------------------------------------------------------

// "device": "cpu" is what a scenario without the field means: the same result JSON and
// the same parameters, bit for bit (the resolved scenario echoes "device": "cpu" either
// way). Centralized parallel SGD and CHOCO-SGD with scaled signs, shortened.
TEST(EmulatedDevice, ExplicitCpuEqualsTheDefaultBitForBit) {
  for (const char* name : {"centralized", "choco_ring8_sign"}) {
    json doc = scenario_file(name);
    doc["steps"] = 30;
    ASSERT_FALSE(doc.contains("device"));
    const auto a = run_with_params(doc, "default");
    const auto b = run_with_params(with_device(doc, "cpu"), "cpu");
    EXPECT_EQ(a.result.to_json().dump(), b.result.to_json().dump()) << name;
    EXPECT_EQ(a.params, b.params) << name;
    EXPECT_EQ(a.result.to_json()["scenario"]["device"], "cpu");
  }
}

// "cuda" where this LibTorch has no CUDA (a CPU build) or sees no device: the loader
// stops at /device and says which, and `dtsim run` prints that as one line, exit 2.
TEST(EmulatedDevice, CudaWithoutACudaDeviceIsAOneLineErrorAtDevice) {
  if (at::hasCUDA()) GTEST_SKIP() << "this LibTorch sees a CUDA device";
  const json doc = with_device(scenario_file("centralized"), "cuda");
  std::string message;
  try {
    parse_scenario(doc);
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.path(), "/device");
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "\"device\": \"cuda\" was accepted without a CUDA device";
#if DTSIM_TORCH_CUDA
  EXPECT_NE(message.find("sees none"), std::string::npos) << message;
#else
  EXPECT_NE(message.find("CUDA LibTorch"), std::string::npos) << message;
#endif

  const auto dir = testing::fresh_dir("device-cli");
  testing::write_file(dir / "cuda.json", doc.dump());
  const auto r = testing::run_command(std::string(DTSIM_BINARY) + " run --quiet " + (dir / "cuda.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("/device: "), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(EmulatedDevice, UnknownDeviceNamesTheChoices) {
  try {
    parse_scenario(with_device(scenario_file("centralized"), "tpu"));
    FAIL() << "\"device\": \"tpu\" was accepted";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), "/device: expected one of cpu, cuda, got \"tpu\" (did you mean `cpu`?)");
  }
}

// --- GPU machine -----------------------------------------------------------------------

#define DTSIM_REQUIRE_CUDA() \
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device"

// The largest |a - b| / (1 + |b|) over every rank's parameters.
double max_param_error(const RunOutput& a, const RunOutput& b) {
  double worst = 0.0;
  for (std::size_t r = 0; r < b.params.size(); ++r)
    for (std::size_t i = 0; i < b.params[r].size(); ++i)
      worst = std::max(worst, std::abs(a.params[r][i] - b.params[r][i]) / (1.0 + std::abs(b.params[r][i])));
  return worst;
}

double max_loss_error(const RunResult& a, const RunResult& b) {
  double worst = 0.0;
  for (std::size_t t = 0; t < b.loss.size(); ++t) worst = std::max(worst, std::abs(a.loss.at(t) - b.loss[t]));
  return worst;
}

// Both runs draw the same data, partition, mini-batches and initial model (on the CPU,
// then copied) and move the same messages (the CUDA compression and aggregation kernels
// give the CPU kernels' bytes). What differs is the workload's math: cuBLAS sums the
// mini-batch's dot products and means in another order than the CPU, a few ulps (about
// 1e-7 relative) per step. The algorithms damp such differences (SGD on a smooth convex
// loss is contractive), so they stay near that level:
//   centralized parallel SGD, 200 steps: per-step loss within 1e-5, parameters within
//   1e-4 relative (hundreds of ulps of headroom);
//   CHOCO-SGD with scaled signs: a coordinate of x - x^ within rounding of 0 can take the
//   other sign on the GPU and move that coordinate by about 2 gamma scale, so: per-step
//   loss within 1e-4, parameters within 1e-3 relative.
// Message sizes (n_bits, wire bytes, calls) and simulated times are equal exactly: the
// cost model does not look at the values.
void expect_follows_cpu(const char* name, double loss_tol, double param_tol) {
  const json doc = scenario_file(name);
  const auto cpu = run_with_params(doc, std::string(name) + "-cpu");
  const auto gpu = run_with_params(with_device(doc, "cuda"), std::string(name) + "-cuda");
  EXPECT_EQ(gpu.result.to_json()["scenario"]["device"], "cuda");
  EXPECT_EQ(gpu.result.n_bits, cpu.result.n_bits) << name;
  EXPECT_EQ(gpu.result.wire_bytes, cpu.result.wire_bytes) << name;
  EXPECT_EQ(gpu.result.step_time_s, cpu.result.step_time_s) << name;
  EXPECT_LE(max_loss_error(gpu.result, cpu.result), loss_tol) << name;
  EXPECT_NEAR(gpu.result.final_loss, cpu.result.final_loss, loss_tol) << name;
  EXPECT_LE(max_param_error(gpu, cpu), param_tol) << name;
}

TEST(EmulatedDeviceCuda, CentralizedParallelSgdFollowsTheCpuRun) {
  DTSIM_REQUIRE_CUDA();
  expect_follows_cpu("centralized", 1e-5, 1e-4);
}

TEST(EmulatedDeviceCuda, ChocoSgdWithScaledSignsFollowsTheCpuRun) {
  DTSIM_REQUIRE_CUDA();
  expect_follows_cpu("choco_ring8_sign", 1e-4, 1e-3);
}

// Every algorithm keeps its state with the parameters (at::zeros_like, options of the
// parameter tensors) and reads nothing through a host pointer into device memory: each
// runs a few steps with every tensor on the GPU, sending the same sizes as on the CPU.
// SINGA's DistOpt and PyTorch DDP run on ResNet-20's shapes (staged backward, many
// partitions or buckets).
TEST(EmulatedDeviceCuda, EveryAlgorithmRunsOnTheGpu) {
  DTSIM_REQUIRE_CUDA();
  std::vector<std::pair<std::string, json>> cases;
  for (const char* name : {"centralized", "quickstart", "choco_ring8_sign", "dcd_psgd_ring8_qsgd",
                           "ecd_psgd_ring8_qsgd", "deepsqueeze_ring8_sign", "sparsified_sgd", "sign_sgd",
                           "ef_sign_sgd", "local_sgd", "post_local_sgd", "local_sign_sgd", "local_ef_sign_sgd"})
    cases.emplace_back(name, scenario_file(name));
  json fp32_signs = scenario_file("local_ef_sign_sgd");  // the file's sends packed signs
  fp32_signs["algorithm"]["packed_signs"] = false;
  cases.emplace_back("local_ef_sign_sgd fp32 signs", fp32_signs);
  json qsgd = scenario_file("sparsified_sgd");  // the file's is top-k with mask_momentum
  qsgd["algorithm"]["mask_momentum"] = false;
  qsgd["algorithm"]["compressor"] = {{"kind", "qsgd"}, {"levels", 15}};
  cases.emplace_back("sparsified_sgd qsgd", qsgd);
  for (const char* variant : {"sync", "half", "partial", "sparse"}) {
    json d = scenario_file("singa_resnet50_sync");
    d["ranks"] = 4;
    d["workload"] = {{"type", "resnet20"}, {"batch_size", 8}};
    d["algorithm"]["variant"] = variant;
    d["algorithm"]["threshold"] = 16384;
    d["algorithm"]["buffer_size"] = 65536;
    d["topology"] = {{"kind", "ring"}};
    cases.emplace_back(std::string("distopt ") + variant, d);
  }
  // PyTorch DDP's hooks, on the same shapes (buckets of 64 KB after a first of 16 KB);
  // PowerSGD from step 3 at rank 2.
  for (const char* hook : {"allreduce", "fp16_compress", "bf16_compress", "powersgd"}) {
    json d = scenario_file("ddp_resnet50_16_fp16");
    d["ranks"] = 4;
    d["timing_only"] = false;
    d["workload"] = {{"type", "resnet20"}, {"batch_size", 8}};
    d["algorithm"]["hook"] = hook;
    d["algorithm"]["bucket_cap_mb"] = 0.0625;
    d["algorithm"]["first_bucket_mb"] = 0.015625;
    if (std::string(hook) == "powersgd") {
      d["algorithm"]["start_powerSGD_iter"] = 2;
      d["algorithm"]["matrix_approximation_rank"] = 2;
    }
    cases.emplace_back(std::string("ddp ") + hook, d);
  }
  for (auto& [name, doc] : cases) {
    doc["steps"] = 4;
    doc["eval_every"] = 0;
    const auto cpu = run_emulated(parse_scenario(doc));
    const auto gpu = run_emulated(parse_scenario(with_device(doc, "cuda")));
    EXPECT_EQ(gpu.n_bits, cpu.n_bits) << name;
    EXPECT_EQ(gpu.wire_bytes, cpu.wire_bytes) << name;
    EXPECT_EQ(gpu.calls, cpu.calls) << name;
    EXPECT_TRUE(std::isfinite(gpu.final_loss)) << name;
    EXPECT_NEAR(gpu.final_loss, cpu.final_loss, 1e-3 * (1.0 + std::abs(cpu.final_loss))) << name;
  }
}

// A small Fashion-MNIST look-alike in plain IDX files (magic 0x0000080N, big-endian
// dimensions, unsigned bytes): seeded random pixels, labels 0..9 in turn.
void write_idx(const fs::path& file, const at::Tensor& bytes) {
  std::ofstream out(file, std::ios::binary);
  const auto put32 = [&](std::uint32_t v) {
    const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    out.write(b, 4);
  };
  put32(0x800 + static_cast<std::uint32_t>(bytes.dim()));
  for (auto d : bytes.sizes()) put32(static_cast<std::uint32_t>(d));
  out.write(reinterpret_cast<const char*>(bytes.data_ptr<std::uint8_t>()), bytes.numel());
}

void write_fake_fashion(const fs::path& dir, std::int64_t train, std::int64_t test) {
  auto gen = at::detail::createCPUGenerator(5);
  for (const auto& [name, n] : {std::pair<const char*, std::int64_t>{"train", train}, {"t10k", test}}) {
    write_idx(dir / (std::string(name) + "-images-idx3-ubyte"), at::randint(0, 256, {n, 28, 28}, gen, at::kByte));
    write_idx(dir / (std::string(name) + "-labels-idx1-ubyte"), at::arange(n, at::kLong).remainder(10).to(at::kByte));
  }
}

// The image models (conv2d, max-pooling and their backward passes in cuDNN and ATen's CUDA
// kernels, against the CPU's): centralized SGD on 4 ranks, 20 steps, on a generated
// dataset. Float sums in other orders again, through more layers: per-step loss within
// 1e-4, parameters within 1e-3 relative.
TEST(EmulatedDeviceCuda, ImageModelsFollowTheCpuRun) {
  DTSIM_REQUIRE_CUDA();
  const auto dir = testing::fresh_dir("device-fashion");
  write_fake_fashion(dir, 256, 64);
  for (const char* type : {"mlp", "cnn"}) {
    json doc = scenario_file("centralized");
    doc["ranks"] = 4;
    doc["steps"] = 20;
    doc["workload"] = {{"type", type}, {"data_dir", dir.string()}, {"batch_size", 16}};
    doc["algorithm"]["lr"] = 0.05;
    const auto cpu = run_with_params(doc, std::string(type) + "-cpu");
    const auto gpu = run_with_params(with_device(doc, "cuda"), std::string(type) + "-cuda");
    EXPECT_EQ(gpu.result.wire_bytes, cpu.result.wire_bytes) << type;
    EXPECT_LE(max_loss_error(gpu.result, cpu.result), 1e-4) << type;
    EXPECT_NEAR(gpu.result.final_test_loss, cpu.result.final_test_loss, 1e-4) << type;
    EXPECT_LE(max_param_error(gpu, cpu), 1e-3) << type;
  }
  fs::remove_all(dir);
}

// "compute": {"timing": "measured"} on the GPU waits for the device around each phase:
// every step spends measured, positive compute time, and the run's figures are finite.
TEST(EmulatedDeviceCuda, MeasuredComputeTimesTheDevicesWork) {
  DTSIM_REQUIRE_CUDA();
  json doc = with_device(scenario_file("choco_ring8_sign"), "cuda");
  doc["steps"] = 10;
  doc["compute"] = {{"timing", "measured"}};
  const auto r = run_emulated(parse_scenario(doc));
  for (double c : r.compute_time_s) EXPECT_GT(c, 0.0);
  EXPECT_TRUE(std::isfinite(r.final_loss));
}

}  // namespace
}  // namespace dtsim::runner
