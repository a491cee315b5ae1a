// The language model: workload "gpt" (workloads/gpt_model.hpp, gpt_workload.hpp) and its data
// sources "text" and "tokens" (workloads/text_data.hpp).
//
// - The model has nanoGPT's parameter names, order and count (closed form), and the same loss
//   and gradients as a torch.nn module written in Python (tests/pytorch/gpt_reference.py)
//   from the same parameters on the same tokens. Tolerance: both run the same ATen kernels
//   (the PyTorch of the LibTorch built against runs it: tests/python_torch.hpp), but the
//   module's autograd graph is not the functional one op for op (nn.Linear and F.linear
//   dispatch alike, the tied head's two gradient contributions may accumulate in either
//   order), so fp32 results may differ by reassociation: 1e-5 of each tensor's largest
//   gradient (about 100 fp32 ulps); fp64 1e-12.
//   Measured here: 0 in both (the same kernels in the same order, bit for bit).
// - The stages produce backward()'s gradients; the text split, shards and windows follow the
//   stated rules; the readers refuse bad input with one line naming the file; a run on the
//   fortunes corpus trains (held-out loss falls).
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "python_torch.hpp"
#include "test_util.hpp"
#include "workloads/gpt_model.hpp"
#include "workloads/gpt_workload.hpp"
#include "workloads/text_data.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using workloads::GptSpec;

TEST(Gpt, ParameterNamesOrderAndCount) {
  for (const GptSpec& s : {GptSpec{}, GptSpec{.layers = 1, .heads = 1, .width = 8, .context = 5, .vocab = 11},
                           GptSpec{.layers = 12, .heads = 12, .width = 768, .context = 1024, .vocab = 50257}}) {
    const auto tensors = workloads::gpt_tensors(s);
    ASSERT_EQ(tensors.size(), static_cast<std::size_t>(4 + 12 * s.layers));
    std::int64_t n = 0;
    for (const auto& t : tensors) {
      std::int64_t e = 1;
      for (auto d : t.shape) e *= d;
      n += e;
    }
    const std::int64_t d = s.width;
    EXPECT_EQ(n, s.vocab * d + s.context * d + s.layers * (12 * d * d + 13 * d) + 2 * d);
    EXPECT_EQ(workloads::gpt_parameter_count(s), n);
  }
  EXPECT_EQ(workloads::gpt_parameter_count({}), 437760);  // the default: 2 x 128, context 64, bytes
  // GPT-2 small's 124,439,808 (wte tied), as the shape model gpt2_small counts it.
  EXPECT_EQ(workloads::gpt_parameter_count({.layers = 12, .heads = 12, .width = 768, .context = 1024, .vocab = 50257}),
            124439808);
  const auto t = workloads::gpt_tensors({});
  EXPECT_EQ(t.front().name, "transformer.wte.weight");
  EXPECT_EQ(t[1].name, "transformer.wpe.weight");
  EXPECT_EQ(t[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(t[4].shape, (std::vector<std::int64_t>{384, 128}));
  EXPECT_EQ(t.back().name, "transformer.ln_f.bias");
  // Initialisation: LayerNorm 1 / 0, biases 0, weights N(0, 0.02^2), c_proj N(0, (0.02 / 2)^2).
  const auto p = workloads::gpt_initial_parameters({}, 3);
  EXPECT_TRUE(at::equal(p[2], at::ones({128})));
  EXPECT_TRUE(at::equal(p[5], at::zeros({384})));
  EXPECT_NEAR(p[0].std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(p[6].std().item<double>(), 0.01, 0.001);  // attn.c_proj.weight, 2 layers
  EXPECT_TRUE(at::equal(p[0], workloads::gpt_initial_parameters({}, 3)[0]));
  EXPECT_FALSE(at::equal(p[0], workloads::gpt_initial_parameters({}, 4)[0]));
}

// --- against a PyTorch module ---------------------------------------------------------------

c10::impl::GenericDict load(const fs::path& file) {
  const auto text = testing::read_file(file);
  return torch::jit::pickle_load(std::vector<char>(text.begin(), text.end())).toGenericDict();
}

at::Tensor item(const c10::impl::GenericDict& dict, const std::string& key) {
  for (const auto& kv : dict)
    if (kv.key().toStringRef() == key) return kv.value().toTensor();
  ADD_FAILURE() << "no " << key;
  return at::zeros({1});
}

struct Worst {
  double loss = 0, grad = 0;
};

Worst against_pytorch(const std::string& python, const GptSpec& s, at::ScalarType dtype, const fs::path& dir) {
  auto params = workloads::gpt_initial_parameters(s, 11);
  auto gen = at::detail::createCPUGenerator(12);
  // Random weights instead of the initial ones' zeros and ones, so every term counts.
  for (auto& p : params) p = (p + at::randn(p.sizes(), gen) * 0.05).to(dtype);
  const auto tokens = at::randint(0, s.vocab, {3, s.context}, gen, at::kLong);
  const auto targets = at::randint(0, s.vocab, {3, s.context}, gen, at::kLong);
  const auto names = workloads::gpt_tensors(s);
  c10::impl::GenericDict in(c10::StringType::get(), c10::TensorType::get());
  for (std::size_t i = 0; i < params.size(); ++i) in.insert(names[i].name, params[i]);
  in.insert("tokens", tokens);
  in.insert("targets", targets);
  const auto bytes = torch::jit::pickle_save(in);
  const std::string stem = fmt::format("gpt_{}", c10::toString(dtype));
  testing::write_file(dir / (stem + ".in.pt"), std::string(bytes.begin(), bytes.end()));
  const json spec = {{"in", (dir / (stem + ".in.pt")).string()}, {"out", (dir / (stem + ".out.pt")).string()},
                     {"layers", s.layers}, {"heads", s.heads}, {"width", s.width}, {"context", s.context},
                     {"vocab", s.vocab}};
  testing::write_file(dir / (stem + ".json"), spec.dump());
  const auto r = testing::run_command(python + " " + DTSIM_SOURCE_DIR + "/tests/pytorch/gpt_reference.py " +
                                      (dir / (stem + ".json")).string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return {INFINITY, INFINITY};
  // The module's parameter names and order are ours.
  std::string expected_names;
  for (const auto& t : names) expected_names += t.name + "\n";
  EXPECT_EQ(testing::read_file(dir / (stem + ".out.pt.names")), expected_names);

  std::vector<at::Tensor> leaves;
  for (const auto& p : params) leaves.push_back(p.detach().requires_grad_(true));
  at::Tensor correct;
  const auto loss = workloads::gpt_loss(s, leaves, tokens, targets, &correct);
  loss.backward();
  const auto out = load(dir / (stem + ".out.pt"));
  Worst w;
  w.loss = std::abs(loss.item<double>() - item(out, "loss").item<double>());
  EXPECT_EQ(correct.item<std::int64_t>(), item(out, "correct").item<std::int64_t>());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto theirs = item(out, names[i].name);
    const double scale = std::max(theirs.abs().max().item<double>(), 1e-30);
    w.grad = std::max(w.grad, (leaves[i].grad() - theirs).abs().max().item<double>() / scale);
  }
  return w;
}

TEST(GptAgainstPyTorch, SameLossAndGradients) {
  const auto python = testing::python_with_torch();
  if (python.empty() && testing::python_with_torch_required()) FAIL() << testing::no_python_with_torch();
  if (python.empty()) GTEST_SKIP() << testing::no_python_with_torch();
  const auto dir = testing::fresh_dir("gpt-pytorch");
  const GptSpec s{.layers = 2, .heads = 4, .width = 32, .context = 16, .vocab = 256};
  const auto f32 = against_pytorch(python, s, at::kFloat, dir);
  const auto f64 = against_pytorch(python, s, at::kDouble, dir);
  std::printf("gpt vs torch.nn: fp32 |loss| diff %.3g, gradients %.3g of each tensor's max; fp64 %.3g, %.3g\n", f32.loss,
              f32.grad, f64.loss, f64.grad);
  EXPECT_LE(f32.loss, 1e-5);
  EXPECT_LE(f32.grad, 1e-5);
  EXPECT_LE(f64.loss, 1e-12);
  EXPECT_LE(f64.grad, 1e-12);
  fs::remove_all(dir);
}

// --- text data, shards, windows -----------------------------------------------------------------

// A folder as fortunes has it: text files, an index holding NUL bytes, a link to a text file
// (which counts once), a hidden file, a subfolder.
fs::path text_folder(const std::string& name) {
  const auto dir = testing::fresh_dir(name);
  testing::write_file(dir / "b", std::string(50, 'b'));
  testing::write_file(dir / "a", std::string(40, 'a') + std::string(10, 'A'));
  testing::write_file(dir / "a.dat", std::string("\x01\x00\x00\x02", 4));
  fs::create_symlink(dir / "a", dir / "a.u8");
  testing::write_file(dir / ".hidden", "hidden");
  fs::create_directories(dir / "sub");
  testing::write_file(dir / "sub" / "c", std::string(20, 'c'));
  return dir;
}

TEST(TextData, FolderOrderSplitAndViews) {
  const auto dir = text_folder("text-folder");
  const auto files = workloads::list_text_files(dir.string(), 0.1);
  ASSERT_EQ(files.files.size(), 3u);  // a, b, sub/c: no index, no link, no hidden file
  EXPECT_EQ(fs::path(files.files[0]).filename(), "a");
  EXPECT_EQ(fs::path(files.files[1]).filename(), "b");
  EXPECT_EQ(fs::path(files.files[2]).filename(), "c");
  EXPECT_EQ(files.train_bytes, 45 + 45 + 18);  // floor(0.1 x size) of each file held out
  EXPECT_EQ(files.test_bytes, 5 + 5 + 2);
  const auto data = workloads::read_text_corpus(dir.string(), 0.1);
  const auto stream = std::string(40, 'a') + std::string(5, 'A') + std::string(45, 'b') + std::string(18, 'c');
  const auto held = std::string(5, 'A') + std::string(5, 'b') + std::string(2, 'c');
  ASSERT_EQ(data->train_x.numel(), static_cast<std::int64_t>(stream.size()) - 1);
  for (std::size_t i = 0; i + 1 < stream.size(); ++i) {
    ASSERT_EQ(data->train_x[static_cast<std::int64_t>(i)].item<std::uint8_t>(), static_cast<std::uint8_t>(stream[i]));
    ASSERT_EQ(data->train_y[static_cast<std::int64_t>(i)].item<std::uint8_t>(), static_cast<std::uint8_t>(stream[i + 1]));
  }
  ASSERT_EQ(data->test_x.numel(), static_cast<std::int64_t>(held.size()) - 1);
  EXPECT_EQ(data->test_y[10].item<std::uint8_t>(), 'c');
  EXPECT_EQ(data->classes, 256);
  // One file: its own last tenth; holdout 0: no held-out set.
  EXPECT_EQ(workloads::read_text_corpus((dir / "b").string(), 0.1)->train_x.numel(), 44);
  EXPECT_FALSE(workloads::read_text_corpus((dir / "b").string(), 0.0)->has_test());
  fs::remove_all(dir);
}

TEST(TextData, BadInputIsOneLineNamingThePath) {
  const auto dir = testing::fresh_dir("text-bad");
  testing::write_file(dir / "bin", std::string("\x00\x01", 2));
  fs::create_directories(dir / "empty");
  for (const auto& path : {dir / "absent", dir / "bin", dir / "empty"}) {
    try {
      workloads::read_text_corpus(path.string(), 0.1);
      ADD_FAILURE() << path << " accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path.string() + ": ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  // Token files: a non-integer x, mismatched shapes, negative tokens, a missing y.
  auto save = [&](const std::string& name, std::vector<std::pair<std::string, at::Tensor>> items) {
    c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
    for (auto& [k, v] : items) dict.insert(k, v);
    const auto bytes = torch::jit::pickle_save(dict);
    testing::write_file(dir / name, std::string(bytes.begin(), bytes.end()));
    return (dir / name).string();
  };
  const auto ok = at::randint(0, 50, {6, 9}, at::detail::createCPUGenerator(1), at::kLong);
  const auto good = workloads::read_token_file(save("good.pt", {{"x", ok}, {"y", ok + 1}, {"test_x", ok}, {"test_y", ok}}));
  EXPECT_EQ(good->train_x.sizes(), ok.sizes());
  EXPECT_EQ(good->classes, ok.max().item<std::int64_t>() + 2);
  for (const auto& file : {save("float.pt", {{"x", ok.to(at::kFloat)}, {"y", ok}}),
                           save("shape.pt", {{"x", ok}, {"y", ok.narrow(1, 0, 4)}}),
                           save("negative.pt", {{"x", ok - 10}, {"y", ok}}), save("noy.pt", {{"x", ok}}),
                           save("test.pt", {{"x", ok}, {"y", ok}, {"test_x", ok.narrow(1, 0, 3)}, {"test_y", ok.narrow(1, 0, 3)}})}) {
    try {
      workloads::read_token_file(file);
      ADD_FAILURE() << file << " accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(file + ": ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  fs::remove_all(dir);
}

// Each rank reads windows of context + 1 bytes inside its own contiguous shard, targets the
// inputs shifted by one byte; the same seed draws the same windows.
TEST(TextData, RanksReadRandomWindowsOfTheirOwnShard) {
  auto data = std::make_shared<workloads::LabelledData>();
  const auto stream = at::arange(0, 1000, at::kLong).remainder(251).to(at::kByte);  // byte i = i mod 251
  data->train_x = stream.narrow(0, 0, 999);
  data->train_y = stream.narrow(0, 1, 999);
  data->classes = 256;
  const GptSpec s{.layers = 1, .heads = 2, .width = 8, .context = 16, .vocab = 256};
  std::vector<at::Tensor> first;
  for (int rank = 0; rank < 4; ++rank) {
    workloads::GptWorkload w(s, data, 5, 9, rank, 4);
    EXPECT_EQ(w.shard_begin(), 999 * rank / 4);
    EXPECT_EQ(w.shard_end(), 999 * (rank + 1) / 4);
    const auto params = w.initial_parameters();
    for (int step = 0; step < 20; ++step) {
      w.forward(params);
      const auto x = w.last_tokens(), y = w.last_targets();
      ASSERT_EQ(x.sizes(), (std::vector<std::int64_t>{5, 16}));
      for (std::int64_t b = 0; b < 5; ++b) {
        const std::int64_t start = x[b][0].item<std::int64_t>();  // byte value = position mod 251
        // Positions are consecutive bytes and the targets the next ones.
        EXPECT_TRUE(at::equal(y[b], (x[b] + 1).remainder(251))) << "rank " << rank;
        EXPECT_TRUE(at::equal(x[b].narrow(0, 1, 15), y[b].narrow(0, 0, 15)));
        (void)start;
      }
      if (step == 0) first.push_back(x.clone());
      std::vector<at::Tensor> grads;
      for (const auto& p : params) grads.push_back(at::zeros_like(p));
      w.backward(params, grads);
    }
    // The window's positions: find them from the shard (bytes repeat every 251 positions,
    // so check against every position of the shard that starts such a window).
    workloads::GptWorkload again(s, data, 5, 9, rank, 4);
    again.forward(params);
    EXPECT_TRUE(at::equal(again.last_tokens(), first.back()));
  }
  EXPECT_FALSE(at::equal(first[0], first[1]));
  // Windows lie inside the shard: with a shard of exactly one window there is one start.
  workloads::GptWorkload tight(s, data, 3, 9, 0, 62);  // 999 / 62: shards of 16 positions
  tight.forward(tight.initial_parameters());
  for (std::int64_t b = 0; b < 3; ++b) EXPECT_EQ(tight.last_tokens()[b][0].item<std::int64_t>(), 0);
  EXPECT_THROW(workloads::GptWorkload(s, data, 3, 9, 0, 63), std::invalid_argument);  // 15 positions
}

// The stages produce backward()'s gradients, each parameter in exactly one stage; their
// costs sum to backward_cost, twice the forward's.
TEST(Gpt, StagesAreTheBackwardPass) {
  auto data = std::make_shared<workloads::LabelledData>();
  const auto stream = at::randint(0, 256, {2000}, at::detail::createCPUGenerator(3), at::kLong).to(at::kByte);
  data->train_x = stream.narrow(0, 0, 1999);
  data->train_y = stream.narrow(0, 1, 1999);
  data->classes = 256;
  const GptSpec s{.layers = 3, .heads = 2, .width = 16, .context = 8, .vocab = 256};
  workloads::GptWorkload a(s, data, 4, 1, 0, 1), b(s, data, 4, 1, 0, 1);
  const auto params = a.initial_parameters();
  std::vector<at::Tensor> ga, gb;
  for (const auto& p : params) {
    ga.push_back(at::zeros_like(p));
    gb.push_back(at::zeros_like(p));
  }
  EXPECT_EQ(a.forward(params), b.forward(params));
  a.backward(params, ga);
  const auto stages = b.backward_stages();
  ASSERT_EQ(stages.size(), 5u);  // ln_f and head, 3 blocks, embeddings
  std::vector<int> seen(params.size(), 0);
  double flops = 0;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    b.backward_stage(k, params, gb);
    for (auto i : stages[k].params) ++seen[i];
    flops += stages[k].cost.flops;
  }
  for (auto n : seen) EXPECT_EQ(n, 1);
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(at::equal(ga[i], gb[i])) << i;
  EXPECT_DOUBLE_EQ(flops, b.backward_cost().flops);
  EXPECT_DOUBLE_EQ(b.backward_cost().flops, 2 * b.forward_cost().flops);
  // The forward's FLOPs: about 2 x (parameters without the embeddings' look-ups, plus the tied
  // head) per token, plus attention's 4 T d per token and layer, and the elementwise work.
  const double d = 16, T = 8, tokens = 4 * T;
  const double matmuls = 2 * (3 * 12 * d * d + d * 256) + 3 * 4 * T * d;
  EXPECT_GT(a.forward_cost().flops, tokens * matmuls);
  EXPECT_LT(a.forward_cost().flops, 1.5 * tokens * matmuls);
  // Evaluation: loss near ln 256 at initialisation, next-token accuracy a fraction.
  const auto e = a.evaluate(params);
  EXPECT_NEAR(e.loss, std::log(256.0), 0.1);
  EXPECT_GE(e.accuracy, 0.0);
  EXPECT_LE(e.accuracy, 1.0);
  EXPECT_FALSE(a.evaluate_test(params).has_value());
}

// --- scenarios -----------------------------------------------------------------------------

json gpt_scenario(const json& workload, int ranks, int steps) {
  return {{"name", "gpt"},
          {"ranks", ranks},
          {"steps", steps},
          {"seed", 1},
          {"eval_every", steps / 2},
          {"workload", workload},
          {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.3}, {"momentum", 0.9}}},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1.25}}}};
}

TEST(GptScenario, ParseEchoAndErrors) {
  const auto dir = text_folder("gpt-scenario");
  const json w = {{"type", "gpt"}, {"data", "text"}, {"text_path", dir.string()}, {"layers", 1}, {"heads", 2},
                  {"width", 16}, {"context", 8}, {"batch_size", 4}};
  const auto s = runner::parse_scenario(gpt_scenario(w, 2, 4));
  EXPECT_EQ(workloads::settings_of<workloads::GptSpec>(s.workload).context, 8);
  EXPECT_EQ(s.workload.data.source, "text");
  const json echo = s.to_json();
  EXPECT_EQ(echo["workload"]["holdout"], 0.1);
  EXPECT_EQ(echo["workload"]["vocab"], 256);
  EXPECT_EQ(runner::parse_scenario(echo).to_json(), echo);
  auto error = [&](json bad, int ranks = 2) -> std::string {
    try {
      runner::parse_scenario(gpt_scenario(bad, ranks, 4));
    } catch (const runner::ScenarioError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return e.path();
    }
    return "accepted";
  };
  auto with = [&](const char* key, json value) {
    json b = w;
    b[key] = value;
    return b;
  };
  EXPECT_EQ(error(with("heads", 3)), "/workload/heads");
  EXPECT_EQ(error(with("context", 60)), "/workload/context");  // 108 bytes over 2 ranks
  EXPECT_EQ(error(with("context", 20), 1), "/workload/context");  // the held-out part is 12 bytes
  EXPECT_EQ(error(with("vocab", 100)), "/workload/vocab");
  EXPECT_EQ(error(with("text_path", (dir / "absent").string())), "/workload/text_path");
  EXPECT_EQ(error(with("holdout", 1.0)), "/workload/holdout");
  EXPECT_EQ(error(with("image_size", 32)), "/workload/image_size");
  EXPECT_EQ(error(with("data", "cifar10")), "/workload/data");
  fs::remove_all(dir);
}

// End to end on Debian's fortunes: 2 ranks of a 1-layer model, 40 steps of all-reduce SGD:
// the held-out loss falls well below its start near ln 256 = 5.55.
TEST(GptScenario, TrainsOnFortunes) {
  if (!fs::exists("/usr/share/games/fortunes")) GTEST_SKIP() << "no fortunes package (apt-get install fortunes)";
  const json w = {{"type", "gpt"}, {"layers", 1}, {"heads", 2}, {"width", 32}, {"context", 32}, {"batch_size", 8},
                  {"eval_windows", 64}};
  const auto r = runner::run_emulated(runner::parse_scenario(gpt_scenario(w, 2, 40)));
  ASSERT_EQ(r.eval.size(), 2u);
  std::printf("gpt on fortunes: step loss %.3f -> %.3f, held-out loss %.3f (step 20) -> %.3f (step 40), accuracy %.3f\n",
              r.loss.front(), r.loss.back(), r.eval.front().test_loss, r.eval.back().test_loss,
              r.eval.back().test_accuracy);
  EXPECT_NEAR(r.loss.front(), std::log(256.0), 0.2);
  EXPECT_LT(r.eval.back().test_loss, 3.6);
  EXPECT_EQ(r.diverged_at_step, 0);
}

}  // namespace
}  // namespace dtsim
