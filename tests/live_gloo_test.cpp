// Live over Gloo versus emulated: 4 processes of `dtsim live` on localhost and one
// emulated run of the same scenario end 20 steps with the same parameters on every
// rank (to 1e-5) and count the same bytes per step; logistic regression under every
// algorithm, and the script-exported TorchScript MLP (workload torchscript) under parallel
// SGD.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <vector>

#include <torch/csrc/jit/serialization/pickle.h>

#include <ATen/CPUGeneratorImpl.h>

#include "comm/live_env.hpp"
#include "test_util.hpp"

namespace dtsim {
namespace {

using nlohmann::json;

// The centralized compressed and local-SGD algorithms, by test parameter name; sync and
// local steps both occur in the 20 steps of the local family (H = 3, every step before 4).
json centralized_local_algorithm(const std::string& name) {
  const json momentum = {{"momentum", 0.9}, {"weight_decay", 1e-4}};
  const std::map<std::string, json> algorithms = {
      {"sparsified_top_k", {{"name", "sparsified_sgd"}, {"lr", 0.5}, {"mask_momentum", true},
                            {"compressor", {{"kind", "top_k"}, {"ratio", 0.2}}}}},
      {"sparsified_qsgd", {{"name", "sparsified_sgd"}, {"lr", 0.5}, {"compressor", {{"kind", "qsgd"}, {"levels", 15}}}}},
      {"sparsified_one_bit",
       {{"name", "sparsified_sgd"}, {"lr", 0.5}, {"compressor", {{"kind", "one_bit"}, {"bucket", 32}}}}},
      {"sparsified_warmup_clipped", {{"name", "sparsified_sgd"}, {"lr", 0.5}, {"clip_grad_norm", 0.5},
                                     {"compress_warmup_epochs", 2}, {"compressor", {{"kind", "random_k"}, {"ratio", 0.01}}}}},
      {"parallel_sgd_powersgd", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.5},
                                 {"gradient_compression", "powersgd"}, {"start_powerSGD_iter", 2},
                                 {"min_compression_rate", 0.5}, {"matrix_approximation_rank", 2}}},
      {"sign_sgd", {{"name", "sign_sgd"}, {"lr", 0.02}}},
      {"ef_sign_sgd", {{"name", "ef_sign_sgd"}, {"lr", 0.3}}},
      {"local_sgd", {{"name", "local_sgd"}, {"lr", 0.5}, {"local_steps", 3}, {"turn_on_local_steps_from", 4}}},
      {"local_sign_sgd", {{"name", "local_sign_sgd"}, {"lr", 0.02}, {"local_steps", 3}, {"turn_on_local_steps_from", 4}}},
      {"local_ef_sign_sgd", {{"name", "local_ef_sign_sgd"}, {"lr", 0.5}, {"local_steps", 3}, {"turn_on_local_steps_from", 4}}},
      {"local_ef_sign_sgd_packed",
       {{"name", "local_ef_sign_sgd"}, {"lr", 0.5}, {"local_steps", 3}, {"turn_on_local_steps_from", 4},
        {"packed_signs", true}}}};
  auto it = algorithms.find(name);
  if (it == algorithms.end()) return nullptr;
  json a = it->second;
  for (auto& [k, v] : momentum.items()) a[k] = v;
  return a;
}

// The low-communication LLM methods (issue 48) on the centralized scenario, AdamW inner
// steps (they take no momentum field): outer steps every 3 of the 20 steps; Streaming DiLoCo's
// fragments start at steps 3, 6, ..., 18, each joined a step later, none left in flight at the end.
json low_communication_algorithm(const std::string& name) {
  const std::map<std::string, json> algorithms = {
      {"diloco", {{"name", "diloco"}, {"lr", 0.05}, {"local_steps", 3}}},
      {"diloco_int8", {{"name", "diloco"}, {"lr", 0.05}, {"local_steps", 3}, {"outer_codec", "int8"}}},
      {"streaming_diloco",
       {{"name", "streaming_diloco"}, {"lr", 0.05}, {"local_steps", 6}, {"fragments", 2}, {"overlap_steps", 1}}},
      {"sparseloco", {{"name", "sparseloco"}, {"lr", 0.05}, {"local_steps", 3}, {"density", 0.25}}}};
  auto it = algorithms.find(name);
  return it == algorithms.end() ? json(nullptr) : it->second;
}

// The compressed gossip algorithms on the ring of 4, by test parameter name: each
// exchanges real packed payloads with its neighbours (CHOCO also with the exchange held
// across steps).
json decentralized_algorithm(const std::string& name) {
  const std::map<std::string, json> algorithms = {
      {"choco_sgd_sign", {{"name", "choco_sgd"}, {"compressor", {{"kind", "scaled_sign"}}}, {"consensus_stepsize", 0.4}}},
      {"choco_sgd_top_k_blocking",
       {{"name", "choco_sgd"}, {"compressor", {{"kind", "top_k"}, {"ratio", 0.2}}}, {"consensus_stepsize", 0.3},
        {"overlap", false}}},
      {"dcd_psgd_qsgd", {{"name", "dcd_psgd"}, {"compressor", {{"kind", "qsgd"}, {"levels", 15}}}}},
      {"ecd_psgd_random_k", {{"name", "ecd_psgd"}, {"compressor", {{"kind", "random_k"}, {"ratio", 0.25}}}}},
      {"deepsqueeze_top_k",
       {{"name", "deepsqueeze"}, {"compressor", {{"kind", "top_k"}, {"ratio", 0.2}}}, {"consensus_stepsize", 0.5}}},
      // The compressors after 1-bit SGD, TernGrad and natural compression, on gossip.
      {"deepsqueeze_one_bit",
       {{"name", "deepsqueeze"}, {"compressor", {{"kind", "one_bit"}, {"bucket", 32}}}, {"consensus_stepsize", 0.5}}},
      {"dcd_psgd_terngrad", {{"name", "dcd_psgd"}, {"compressor", {{"kind", "terngrad"}, {"bucket", 32}}}}},
      {"ecd_psgd_natural", {{"name", "ecd_psgd"}, {"compressor", {{"kind", "natural"}}}}}};
  auto it = algorithms.find(name);
  if (it == algorithms.end()) return nullptr;
  json a = it->second;
  a["lr"] = 0.3;
  a["momentum"] = 0.9;
  a["weight_decay"] = 1e-4;
  return a;
}

// Apache SINGA's DistOpt variants (staged backward, stream all-reduces): logistic
// regression's weight (16 elements) is above the threshold of 4 and reduced alone, the
// bias is the leftover group, so K = 2 (partial alternates between them; sparse keeps a
// residual per partition).
json distopt_algorithm(const std::string& name) {
  const std::map<std::string, json> algorithms = {
      {"distopt_sync", {{"variant", "sync"}}},
      {"distopt_half", {{"variant", "half"}, {"clipping", true}, {"clip_value", 0.5}}},
      {"distopt_partial", {{"variant", "partial"}}},
      {"distopt_sparse_top_k", {{"variant", "sparse"}, {"top_k", true}, {"spars", 0.3}}},
      {"distopt_sparse_threshold", {{"variant", "sparse"}, {"spars", 0.02}}}};
  auto it = algorithms.find(name);
  if (it == algorithms.end()) return nullptr;
  json a = it->second;
  a["name"] = "distopt";
  a["threshold"] = 4;
  a["buffer_size"] = 8;
  a["lr"] = 0.5;
  a["momentum"] = 0.9;
  a["weight_decay"] = 1e-4;
  return a;
}

// PyTorch DDP's hooks (staged backward, stream all-reduces): caps of 0 bytes put the
// weight (16 elements) and the bias in buckets of their own. PowerSGD from step 3; at
// min_compression_rate 0.5 the 16 x 1 weight is compressed (16 > 17 x 0.5), so P and Q
// are all-reduced besides the bias.
json ddp_algorithm(const std::string& name) {
  const std::map<std::string, json> algorithms = {
      {"ddp_allreduce", {{"hook", "allreduce"}}},
      {"ddp_fp16", {{"hook", "fp16_compress"}}},
      {"ddp_bf16", {{"hook", "bf16_compress"}}},
      {"ddp_powersgd", {{"hook", "powersgd"}, {"start_powerSGD_iter", 2}, {"min_compression_rate", 0.5}}}};
  auto it = algorithms.find(name);
  if (it == algorithms.end()) return nullptr;
  json a = it->second;
  a["name"] = "ddp";
  a["bucket_cap_mb"] = 0;
  a["first_bucket_mb"] = 0;
  a["lr"] = 0.5;
  a["momentum"] = 0.9;
  a["weight_decay"] = 1e-4;
  return a;
}

// DeMo and 1-bit Adam (their own fields; no SGD momentum): DeMo's all-gathered DCT
// payloads every step; 1-bit Adam's warm-up all-reduces, then from step 6 its two-phase
// compressed all-reduce (point-to-point chunks, all-gathered server chunks).
json demo_one_bit_adam_algorithm(const std::string& name) {
  const std::map<std::string, json> algorithms = {
      {"demo", {{"name", "demo"}, {"lr", 0.01}, {"weight_decay", 1e-4}, {"compression_decay", 0.9},
                {"compression_chunk", 4}, {"compression_topk", 2}}},
      {"one_bit_adam", {{"name", "one_bit_adam"}, {"lr", 0.01}, {"weight_decay", 1e-4}, {"freeze_step", 5}}}};
  auto it = algorithms.find(name);
  return it == algorithms.end() ? json(nullptr) : it->second;
}

// The TorchScript MLP: scripts/export_model.py's export of the built-in mlp for 1 x 4 x 4
// images (tests/data/mlp_4x4_seed5.pt, 16-256-128-10) on 64 random images, both files
// copied next to the scenario and named relative to it.
constexpr const char* kTorchScriptMlp = "torchscript_mlp";
// The built-in ResNet-20 (BatchNorm local to each rank) on Fashion-MNIST padded to 32 x 32.
constexpr const char* kResNet20Real = "resnet20_real";

void write_torchscript_files(const std::filesystem::path& dir) {
  std::filesystem::copy_file(std::filesystem::path(DTSIM_SOURCE_DIR) / "tests" / "data" / "mlp_4x4_seed5.pt",
                             dir / "mlp.pt");
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  dict.insert("x", at::randn({64, 1, 4, 4}, at::detail::createCPUGenerator(3)));
  dict.insert("y", at::arange(64, at::kLong).remainder(10));
  const auto bytes = torch::jit::pickle_save(dict);
  std::ofstream(dir / "images.pt", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

json scenario(const std::string& variant) {
  if (json a = ddp_algorithm(variant); !a.is_null()) {
    json doc = scenario("centralized");
    doc["name"] = "live-" + variant;
    doc["algorithm"] = a;
    return doc;
  }
  if (variant == kTorchScriptMlp) {
    json doc = scenario("centralized");
    doc["name"] = "live-" + variant;
    doc["workload"] = {{"type", "torchscript"}, {"model_file", "mlp.pt"}, {"input_shape", {1, 4, 4}},
                       {"tensors_file", "images.pt"}, {"batch_size", 8}};
    doc["algorithm"]["lr"] = 0.05;
    return doc;
  }
  if (variant == kResNet20Real) {
    json doc = scenario("decentralized");
    doc["name"] = "live-" + variant;
    doc["steps"] = 3;
    doc["workload"] = {{"type", "resnet20_real"}, {"data", "fashion_mnist"}, {"image_size", 32},
                       {"data_dir", "/usr/share/datasets/fashion-mnist"}, {"train_samples", 128},
                       {"test_samples", 32}, {"batch_size", 8}, {"partition", "iid"}};
    doc["algorithm"] = {{"name", "choco_sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true},
                        {"weight_decay", 1e-4}, {"consensus_stepsize", 0.45}, {"compressor", {{"kind", "scaled_sign"}}}};
    return doc;
  }
  if (json a = demo_one_bit_adam_algorithm(variant); !a.is_null()) {
    json doc = scenario("centralized");
    doc["name"] = "live-" + variant;
    doc["algorithm"] = a;
    return doc;
  }
  if (json a = distopt_algorithm(variant); !a.is_null()) {
    json doc = scenario("centralized");
    doc["name"] = "live-" + variant;
    doc["algorithm"] = a;
    return doc;
  }
  if (json a = decentralized_algorithm(variant); !a.is_null()) {
    json doc = scenario("decentralized");
    doc["name"] = "live-" + variant;
    doc["algorithm"] = a;
    return doc;
  }
  if (json a = low_communication_algorithm(variant); !a.is_null()) {
    json doc = scenario("centralized");
    doc["name"] = "live-" + variant;
    doc["algorithm"] = a;
    return doc;
  }
  if (json a = centralized_local_algorithm(variant); !a.is_null()) {
    json doc = scenario("centralized");
    doc["name"] = "live-" + variant;
    doc["algorithm"] = a;
    return doc;
  }
  return {{"name", "live-" + variant},
          {"ranks", 4},
          {"steps", 20},
          {"seed", 11},
          {"workload", {{"kind", "logistic_regression"}, {"samples", 1024}, {"features", 16}, {"batch_size", 32}}},
          {"algorithm",
           {{"name", "parallel_sgd"},
            {"variant", variant},
            {"lr", 0.5},
            {"momentum", 0.9},
            {"nesterov", true},
            {"weight_decay", 1e-4}}},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}};
}

class LiveVersusEmulated : public ::testing::TestWithParam<std::string> {};

TEST_P(LiveVersusEmulated, SameParametersAndBytes) {
  const std::string variant = GetParam();
  auto dir = testing::fresh_dir("live-" + variant);
  const auto file = dir / "s.json";
  testing::write_file(file, scenario(variant).dump());
  if (variant == kTorchScriptMlp) write_torchscript_files(dir);
  const std::string bin = DTSIM_BINARY;

  auto emulated = testing::run_command(bin + " run --quiet " + file.string() + " --out " + (dir / "emu").string() +
                                       " --dump-params " + (dir / "emu" / "p").string());
  ASSERT_EQ(emulated.exit_code, 0) << emulated.output;

  const int port = comm::free_loopback_port();
  std::vector<std::future<testing::CommandResult>> ranks;
  for (int r = 0; r < 4; ++r) {
    const std::string env = "RANK=" + std::to_string(r) + " WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                            std::to_string(port) + " DTSIM_TIMEOUT_S=60 timeout 120 ";
    ranks.push_back(std::async(std::launch::async, testing::run_command,
                               env + bin + " live --quiet " + file.string() + " --out " + (dir / "live").string() +
                                   " --dump-params " + (dir / "live" / "p").string()));
  }
  for (int r = 0; r < 4; ++r) {
    auto res = ranks[r].get();
    ASSERT_EQ(res.exit_code, 0) << "rank " << r << ": " << res.output;
  }

  // fp16 all-reduce (distopt_half): Gloo adds the ranks' fp16 values in its ring's chunk
  // order, the emulated backend in rank order, each addition rounded to fp16 (relative
  // 2^-11), so the reduced gradients differ by a few fp16 ulps and 20 momentum steps at
  // lr 0.5 carry that to about 1e-4 in the parameters.
  // ddp_fp16 likewise. bf16 (Gloo in LibTorch 1.13 has no bf16 reduction: GlooCommunicator
  // all-gathers the payloads and sums them in rank order, as the emulated backend) is exact.
  const double tol = variant == "distopt_half" || variant == "ddp_fp16" ? 2e-3 : 1e-5;
  for (int r = 0; r < 4; ++r) {
    const auto name = "p.rank" + std::to_string(r) + ".json";
    auto live = testing::read_json(dir / "live" / name)["params"];
    auto emu = testing::read_json(dir / "emu" / name)["params"];
    ASSERT_EQ(live.size(), emu.size());
    for (auto& [key, values] : emu.items()) {
      ASSERT_EQ(live[key].size(), values.size()) << key;
      for (std::size_t i = 0; i < values.size(); ++i)
        EXPECT_NEAR(live[key][i].get<double>(), values[i].get<double>(), tol) << "rank " << r << " " << key << "[" << i << "]";
    }
  }
  auto live_result = testing::read_json(dir / "live" / "s.live.result.json");
  auto emu_result = testing::read_json(dir / "emu" / "s.result.json");
  EXPECT_EQ(live_result["mode"], "live");
  EXPECT_EQ(live_result["backend"], "gloo");
  // An all-gather left in flight past its step (Streaming DiLoCo's overlap): the emulated
  // backend charges its bytes when the last rank arrives, which for the ranks that had
  // moved on is the next step; live charges the issuing step. The totals agree (the last
  // exchange is joined before the last step ends).
  const auto& live_bytes = live_result["per_step"]["wire_bytes"];
  const auto& emu_bytes = emu_result["per_step"]["wire_bytes"];
  auto total = [](const json& series) {
    double sum = 0.0;
    for (const auto& v : series) sum += v.get<double>();
    return sum;
  };
  if (variant == "streaming_diloco")
    EXPECT_DOUBLE_EQ(total(live_bytes), total(emu_bytes));
  else
    EXPECT_EQ(live_bytes, emu_bytes);
  EXPECT_EQ(live_result["per_step"]["n_bits"], emu_result["per_step"]["n_bits"]);
  EXPECT_EQ(live_result["per_step"]["calls"], emu_result["per_step"]["calls"]);
  EXPECT_GT(total(emu_bytes), 0.0);  // the local methods' first steps send nothing
}

INSTANTIATE_TEST_SUITE_P(Gloo, LiveVersusEmulated, ::testing::Values("centralized", "decentralized"));
// Bring your own model: autograd through a TorchScript module on every live rank.
INSTANTIATE_TEST_SUITE_P(TorchScript, LiveVersusEmulated, ::testing::Values(kTorchScriptMlp));
// A built-in real model: convolutions, BatchNorm and its local statistics on every live rank.
INSTANTIATE_TEST_SUITE_P(RealModels, LiveVersusEmulated, ::testing::Values(kResNet20Real));
INSTANTIATE_TEST_SUITE_P(CentralizedLocal, LiveVersusEmulated,
                         ::testing::Values("sparsified_top_k", "sparsified_qsgd", "sparsified_one_bit", "parallel_sgd_powersgd",
                                           "sparsified_warmup_clipped", "sign_sgd", "ef_sign_sgd", "local_sgd",
                                           "local_sign_sgd", "local_ef_sign_sgd", "local_ef_sign_sgd_packed"));
INSTANTIATE_TEST_SUITE_P(LowCommunication, LiveVersusEmulated,
                         ::testing::Values("diloco", "diloco_int8", "streaming_diloco", "sparseloco"));
INSTANTIATE_TEST_SUITE_P(DistOpt, LiveVersusEmulated,
                         ::testing::Values("distopt_sync", "distopt_half", "distopt_partial", "distopt_sparse_top_k",
                                           "distopt_sparse_threshold"));
INSTANTIATE_TEST_SUITE_P(Ddp, LiveVersusEmulated, ::testing::Values("ddp_allreduce", "ddp_fp16", "ddp_bf16", "ddp_powersgd"));
INSTANTIATE_TEST_SUITE_P(DemoOneBitAdam, LiveVersusEmulated, ::testing::Values("demo", "one_bit_adam"));
INSTANTIATE_TEST_SUITE_P(Decentralized, LiveVersusEmulated,
                         ::testing::Values("choco_sgd_sign", "choco_sgd_top_k_blocking", "dcd_psgd_qsgd",
                                           "ecd_psgd_random_k", "deepsqueeze_top_k", "deepsqueeze_one_bit",
                                           "dcd_psgd_terngrad", "ecd_psgd_natural"));

// A peer that never arrives ends the job within the timeout with a one-line error,
// not a hang.
TEST(Live, MissingPeerTimesOut) {
  auto dir = testing::fresh_dir("live-timeout");
  const auto file = dir / "s.json";
  testing::write_file(file, scenario("centralized").dump());
  const std::string env = "RANK=1 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(comm::free_loopback_port()) +
                          " DTSIM_TIMEOUT_S=2 timeout 60 ";
  auto r = testing::run_command(env + DTSIM_BINARY + " live --quiet " + file.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("dtsim: run failed: gloo rendezvous at 127.0.0.1"), std::string::npos) << r.output;
}

TEST(Live, WorldSizeMustMatchTheScenario) {
  auto dir = testing::fresh_dir("live-size");
  const auto file = dir / "s.json";
  testing::write_file(file, scenario("centralized").dump());
  auto r = testing::run_command("RANK=0 WORLD_SIZE=3 " + std::string(DTSIM_BINARY) + " live " + file.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "dtsim: error: " + file.string() + ": /ranks: the scenario has 4 ranks but WORLD_SIZE is 3\n");
  r = testing::run_command("env -u RANK WORLD_SIZE=4 " + std::string(DTSIM_BINARY) + " live " + file.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("RANK is not set"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dtsim
