// The language model's readers against mutated inputs, under the contract of the other
// readers (readers.hpp): accept, or throw std::invalid_argument with one line that starts
// with the file's path. Kept in a file of its own (the Reader enum and the corpus folders are
// readers.cpp's), with mutate.hpp's mutations: a token tensors file mutated as the `tensors`
// reader's torch.save files are, a text corpus as the `libsvm` reader's text is. Each input is
// also given to the scenario loader behind /workload/tokens_file or /workload/text_path,
// whose rejection must be a one-line ScenarioError naming that field. nccl-tests' output
// (`dtsim collective --against`), mutated as text, is accepted or refused with one line
// naming the line at fault.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "network_models/nccl_tests_output.hpp"
#include "runner/scenario.hpp"
#include "tests/fuzz/mutate.hpp"
#include "workloads/text_data.hpp"

namespace dtsim::fuzz {
namespace {

namespace fs = std::filesystem;

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string pickled(const std::vector<std::pair<std::string, at::Tensor>>& items) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [k, v] : items) dict.insert(k, v);
  const auto bytes = torch::jit::pickle_save(dict);
  return {bytes.begin(), bytes.end()};
}

// The reader's verdict on a file: "" accepted, else the message (checked here).
std::string read(bool tokens, const fs::path& file) {
  try {
    if (tokens)
      (void)workloads::read_token_file(file.string());
    else
      (void)workloads::read_text_corpus(file.string(), 0.1);
    return "";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << printable(what);
    EXPECT_EQ(what.rfind(file.string(), 0), 0u) << printable(what);
    return what.empty() ? "?" : what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not std::invalid_argument: " << printable(e.what());
    return "?";
  }
}

// The same file behind a gpt scenario: accepted, or a ScenarioError at the field.
void scenario(bool tokens, const fs::path& file, bool reader_accepted) {
  const nlohmann::json doc = {
      {"name", "fuzz"}, {"ranks", 1}, {"steps", 1},
      {"workload", {{"type", "gpt"}, {tokens ? "tokens_file" : "text_path", file.string()}, {"context", 2},
                    {"vocab", 1 << 20}, {"layers", 1}, {"heads", 1}, {"width", 4}}},
      {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}}},
      {"topology", {{"kind", "ring"}}},
      {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1.25}}}};
  try {
    (void)runner::parse_scenario(doc);
  } catch (const runner::ScenarioError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << printable(what);
    EXPECT_EQ(what.rfind("/workload/", 0), 0u) << printable(what);
    // A file the reader accepts may still be refused for the model (too short for context
    // 2, tokens beyond the vocabulary): at the workload's fields, never at the file.
    if (reader_accepted) {
      EXPECT_EQ(e.path().find(tokens ? "tokens_file" : "text_path"), std::string::npos) << what;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ScenarioError: " << printable(e.what());
  }
}

std::vector<std::string> token_seeds() {
  auto gen = at::detail::createCPUGenerator(1);
  const auto x = at::randint(0, 256, {4, 8}, gen, at::kLong);
  return {pickled({{"x", x}, {"y", x.roll(-1, 1)}}),
          pickled({{"x", x}, {"y", x}, {"test_x", x.narrow(0, 0, 2)}, {"test_y", x.narrow(0, 0, 2)}}),
          pickled({{"x", x.to(at::kInt)}, {"y", x.to(at::kShort)}})};
}

std::vector<std::string> text_seeds() {
  std::vector<std::string> seeds{"Hello, world.\n%\nA second fortune, longer than the first one.\n%\n",
                                 std::string(300, 'x') + "\n", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac\n"};
  const fs::path fortunes = "/usr/share/games/fortunes/fortunes";
  if (fs::exists(fortunes)) {
    std::ifstream in(fortunes, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    seeds.push_back(text.substr(0, 4000));
  }
  return seeds;
}

class TextReaders : public ::testing::TestWithParam<bool> {};  // true: tokens, false: text

TEST_P(TextReaders, MutatedInputsKeepTheContract) {
  const bool tokens = GetParam();
  const auto dir = fs::temp_directory_path() / fmt::format("dtsim-fuzz-text-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path file = dir / (tokens ? "t.pt" : "t.txt");
  const auto seeds = tokens ? token_seeds() : text_seeds();
  for (const auto& s : seeds) {
    write_bytes(file, s);
    EXPECT_EQ(read(tokens, file), "") << "a seed is refused";
  }
  Rng rng(tokens ? 48 : 49);
  std::vector<std::string> pool(seeds);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 300; ++i) {
    const bool from_seed = i < 40 || rng.chance(30);
    const std::string& base = from_seed ? rng.pick(seeds) : rng.pick(pool);
    const auto input = mutate(tokens ? Reader::tensors : Reader::libsvm, base, from_seed, pool, rng);
    write_bytes(file, input);
    const auto verdict = read(tokens, file);
    (verdict.empty() ? accepted : rejected) += 1;
    if (i % 10 == 0) scenario(tokens, file, verdict.empty());
    if (pool.size() < 64) pool.push_back(input);
    else pool[rng.below(pool.size())] = input;
  }
  std::printf("%s: %d accepted, %d rejected of 300 mutated inputs\n", tokens ? "tokens" : "text", accepted, rejected);
  EXPECT_GT(rejected, 0);
  fs::remove_all(dir);
}

TEST(NcclTestsOutputReader, MutatedInputsKeepTheContract) {
  std::string run = "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 2 minBytes 8 maxBytes 64\n";
  for (int r = 0; r < 2; ++r) run += fmt::format("#  Rank  {} Group  0 Pid  1 on h device  {} [0x0{}] NVIDIA A100\n", r, r, r);
  for (int b = 8; b <= 64; b *= 2)
    run += fmt::format("{:12} {:13} float sum -1 {:.2f} 0.00 0.00 0 {:.2f} 0.00 0.00 0\n", b, b / 4, 10.0 + b, 10.5 + b);
  const std::vector<std::string> seeds{run, "nThread 1 nGpus 1 minBytes 32\n  32  8  float  sum  10.14  0.00  0.00  0e+00  10.21  0.00  0.00  0e+00\n",
                                       "[1,0]<stdout>:     8     2   float  none  -1  12.9  0.00  0.00  0  12.8  0.00  0.00  N/A\n",
                                       "h:1:1 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 8.\n"
                                       "h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n" + run};
  auto verdict = [](const std::string& text) {
    try {
      (void)net::parse_nccl_tests_output(text);
      return std::string();
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << printable(what);
      EXPECT_TRUE(what.rfind("line ", 0) == 0 || what.rfind("no nccl-tests rows", 0) == 0) << printable(what);
      return what.empty() ? std::string("?") : what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not std::invalid_argument: " << printable(e.what());
      return std::string("?");
    }
  };
  for (const auto& s : seeds) EXPECT_EQ(verdict(s), "") << "a seed is refused";
  Rng rng(50);
  std::vector<std::string> pool(seeds);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 300; ++i) {
    const bool from_seed = i < 40 || rng.chance(30);
    const std::string& base = from_seed ? rng.pick(seeds) : rng.pick(pool);
    const auto input = mutate(Reader::libsvm, base, from_seed, pool, rng);
    (verdict(input).empty() ? accepted : rejected) += 1;
    if (pool.size() < 64) pool.push_back(input);
    else pool[rng.below(pool.size())] = input;
  }
  std::printf("nccl-tests output: %d accepted, %d rejected of 300 mutated inputs\n", accepted, rejected);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);
}

INSTANTIATE_TEST_SUITE_P(Readers, TextReaders, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return std::string(p.param ? "tokens" : "text"); });

}  // namespace
}  // namespace dtsim::fuzz
