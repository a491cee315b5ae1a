// Every reader of user files against mutated inputs: from the real files (and files the
// library's own writers produce), deterministic mutations with a fixed seed; for each
// input the reader accepts it or throws its documented type with a one-line message
// naming where (tests/fuzz/readers.hpp). Then the committed corpus (inputs that once
// broke a reader, and a few seeds) is replayed. Counts, times and how to run longer:
// tests/fuzz/README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "sweep/sweep.hpp"
#include "tests/fuzz/mutate.hpp"
#include "tests/fuzz/readers.hpp"

namespace dtsim::fuzz {

// gtest's names for the parameter and the verdict.
void PrintTo(Reader reader, std::ostream* os) { *os << name_of(reader); }
void PrintTo(Verdict::Kind kind, std::ostream* os) {
  const char* names[] = {"accepted", "rejected", "skipped"};
  *os << names[static_cast<int>(kind)];
}

namespace {

namespace fs = std::filesystem;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// DTSIM_FUZZ_INPUTS mutated inputs in all (default 4000), shared by the readers by what
// one input costs under the sanitizers (a scenario about 25 ms, a sweep 45 ms, which
// parses every point; an IDX file 1 ms), so that the sanitizer run stays near a minute.
std::size_t inputs_for(Reader reader) {
  static const std::map<Reader, int> per_mille{{Reader::scenario, 120}, {Reader::sweep, 30},
                                               {Reader::op_trace, 140}, {Reader::network_model, 45},
                                               {Reader::libsvm, 140},   {Reader::idx, 150},
                                               {Reader::cifar10, 80},   {Reader::tensors, 100},
                                               {Reader::collective_flags, 195}, {Reader::nccl_system, 45}};
  const std::uint64_t total = env_number("DTSIM_FUZZ_INPUTS", 4000);
  return static_cast<std::size_t>(total * per_mille.at(reader) / 1000);
}

// A run's mutations: DTSIM_FUZZ_SEED (default 1), and the reader, so that one reader's
// count does not change another's inputs.
std::uint64_t seed_for(Reader reader) {
  return env_number("DTSIM_FUZZ_SEED", 1) * 0x9e3779b97f4a7c15ULL ^ std::hash<std::string>{}(name_of(reader));
}

// A broken input is kept (fuzz-failures/<reader>/<hash> under the test's directory) so
// that it can be replayed (DTSIM_FUZZ_REPLAY) and, once fixed, added to the corpus.
std::string keep(Reader reader, const std::string& input) {
  const fs::path dir = fs::path("fuzz-failures") / name_of(reader);
  fs::create_directories(dir);
  const fs::path file = dir / sweep::hash_hex(input);
  std::ofstream(file, std::ios::binary).write(input.data(), static_cast<std::streamsize>(input.size()));
  return fs::absolute(file).string();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One input taking longer than this is a hang (DTSIM_FUZZ_SLOW_S; the sanitizers make
// everything several times slower).
double slow_limit() { return static_cast<double>(env_number("DTSIM_FUZZ_SLOW_S", 5)); }

struct Tally {
  std::size_t accepted = 0, rejected = 0, skipped = 0, broken = 0;
  double slowest = 0.0;
};

void run_one(Reader reader, const std::string& input, const std::string& origin, Tally& tally, bool skip_huge = true) {
  const auto t0 = std::chrono::steady_clock::now();
  const Verdict v = check(reader, input, skip_huge);
  const double dt = seconds_since(t0);
  tally.slowest = std::max(tally.slowest, dt);
  if (v.kind == Verdict::Kind::accepted) ++tally.accepted;
  if (v.kind == Verdict::Kind::rejected) ++tally.rejected;
  if (v.kind == Verdict::Kind::skipped) ++tally.skipped;
  static const bool verbose = std::getenv("DTSIM_FUZZ_VERBOSE") != nullptr;  // every verdict, for a person
  if (verbose) std::cout << fmt::format("{:.4f} s {}: {}\n", dt, origin, printable(v.message, 160));
  if (!v.violation.empty() || dt > slow_limit()) {
    if (++tally.broken <= 5)
      ADD_FAILURE() << name_of(reader) << " (" << origin << "): "
                    << (v.violation.empty() ? fmt::format("took {:.1f} s", dt) : v.violation) << "\n  input ("
                    << input.size() << " bytes, kept as " << keep(reader, input) << "): " << printable(input);
  }
}

class FuzzReaders : public ::testing::TestWithParam<Reader> {};

// The seeds themselves are valid inputs; then DTSIM_FUZZ_INPUTS mutations of them (and of
// earlier mutations: a pool of the latest inputs is mutated further, so that changes
// stack up past the first error a seed would hit).
TEST_P(FuzzReaders, MutatedSeedsKeepTheContract) {
  const Reader reader = GetParam();
  const auto seeds = fuzz::seeds(reader);
  ASSERT_FALSE(seeds.empty());
  Tally tally;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const Verdict v = check(reader, seeds[i]);
    EXPECT_EQ(v.violation, "") << "seed #" << i;
    EXPECT_EQ(v.kind, Verdict::Kind::accepted) << name_of(reader) << " seed #" << i << ": " << v.message;
  }
  Rng rng(seed_for(reader));
  std::vector<std::string> pool;
  const std::size_t n = inputs_for(reader);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    const bool from_pool = !pool.empty() && rng.chance(30);
    const std::string& base = from_pool ? rng.pick(pool) : rng.pick(seeds);
    std::string input = mutate(reader, base, !from_pool, seeds, rng);
    run_one(reader, input, fmt::format("mutation #{}", i), tally);
    if (input.size() < (1 << 16)) {
      if (pool.size() < 64) pool.push_back(std::move(input));
      else pool[rng.below(pool.size())] = std::move(input);
    }
  }
  const double elapsed = seconds_since(t0);
  std::cout << fmt::format("{}: {} inputs in {:.1f} s ({} accepted, {} rejected, {} skipped as valid but huge; "
                           "slowest {:.3f} s)\n",
                           name_of(reader), n, elapsed, tally.accepted, tally.rejected, tally.skipped, tally.slowest);
  RecordProperty("inputs", static_cast<int>(n));
  RecordProperty("seconds", fmt::format("{:.1f}", elapsed));
  // The mutations reach both sides of the reader.
  if (n >= 100) {
    EXPECT_GT(tally.accepted, 0u);
    EXPECT_GT(tally.rejected, n / 10);
  }
}

// tests/fuzz/corpus/<reader>/: inputs that once broke a reader, and a few seeds; none is
// skipped as huge (each is known to parse quickly once fixed). One test for every reader:
// a test process costs more than its corpus under the sanitizers.
TEST(FuzzCorpus, EveryReaderKeepsTheContract) {
  for (Reader reader : all_readers()) {
    SCOPED_TRACE(name_of(reader));
    const fs::path dir = fs::path(source_dir()) / "tests" / "fuzz" / "corpus" / name_of(reader);
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    EXPECT_FALSE(files.empty());
    Tally tally;
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::string input{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      run_one(reader, input, f.filename().string(), tally, /*skip_huge=*/false);  // known inputs: all parsed
    }
  }
}

// DTSIM_FUZZ_REPLAY=reader:file checks one input and prints the verdict. Disabled (run
// it with --gtest_also_run_disabled_tests --gtest_filter='*OneInput'): ctest would start
// a process just to skip it.
TEST(FuzzReplay, DISABLED_OneInput) {
  const char* spec = std::getenv("DTSIM_FUZZ_REPLAY");
  if (!spec || !*spec) GTEST_SKIP() << "set DTSIM_FUZZ_REPLAY=reader:file";
  const std::string s = spec;
  const auto colon = s.find(':');
  ASSERT_NE(colon, std::string::npos) << "expected reader:file";
  std::optional<Reader> reader;
  for (Reader r : all_readers())
    if (name_of(r) == s.substr(0, colon)) reader = r;
  ASSERT_TRUE(reader) << "unknown reader " << s.substr(0, colon);
  std::ifstream in(s.substr(colon + 1), std::ios::binary);
  ASSERT_TRUE(in) << "cannot read " << s.substr(colon + 1);
  const std::string input{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto t0 = std::chrono::steady_clock::now();
  const Verdict v = check(*reader, input);
  const char* kinds[] = {"accepted", "rejected", "skipped"};
  std::cout << fmt::format("{} in {:.3f} s: {}\n", kinds[static_cast<int>(v.kind)], seconds_since(t0), v.message);
  EXPECT_EQ(v.violation, "");
}

INSTANTIATE_TEST_SUITE_P(Readers, FuzzReaders, ::testing::ValuesIn(all_readers()),
                         [](const ::testing::TestParamInfo<Reader>& p) { return name_of(p.param); });

}  // namespace
}  // namespace dtsim::fuzz
