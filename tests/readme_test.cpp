// Every command in README.md is run (or, where it needs a cluster launcher, checked), so
// that an example cannot rot: each fenced block carries an HTML comment on the line before
// it saying how it is checked,
//   <!-- readme-test: make -->              make targets: they exist in the Makefile (the
//                                           README's first lines; `make test` is what .ci/run runs)
//   <!-- readme-test: output-of make demo --> the block is what the Makefile's demo recipe prints
//   <!-- readme-test: usage -->             synopses: each subcommand's --help names each flag
//   <!-- readme-test: run [creates=F,..] --> run with bash, in README order, in a scratch copy
//                                           of scenarios/ (exit 0; the files F then exist)
//   <!-- readme-test: launcher -->          torchrun / mpirun / srun lines: the scenario exists
//                                           and the launcher starts as many ranks as it has
//   <!-- readme-test: sweep-file PATH -->   a sweep file: written to PATH and run by `dtsim sweep`
//   <!-- readme-test: text -->              prose in a box (a diagram): not checked
// and a block without one fails the test. Tables that a dtsim command prints (the
// registries' `dtsim list`) sit between
//   <!-- readme-test: table COMMAND --> and <!-- readme-test: end -->
// and must be exactly what COMMAND prints.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "test_util.hpp"

namespace dtsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Block {
  int line = 0;         // of the opening fence, 1-based
  std::string kind;     // the marker's first word ("" when there is none)
  std::string argument; // the rest of the marker
  std::string text;     // the lines between the fences
};

std::vector<Block> fenced_blocks(const std::string& markdown) {
  std::vector<Block> blocks;
  std::istringstream in(markdown);
  std::string line, previous;
  int number = 0;
  const std::regex marker(R"(^<!-- readme-test: (\S+) ?(.*?) ?-->$)");
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      Block b;
      b.line = number;
      std::smatch m;
      if (std::regex_match(previous, m, marker)) {
        b.kind = m[1];
        b.argument = m[2];
      }
      while (std::getline(in, line) && line.rfind("```", 0) != 0) {
        ++number;
        b.text += line + "\n";
      }
      ++number;
      blocks.push_back(b);
    }
    previous = line;
  }
  return blocks;
}

// The regions between "<!-- readme-test: table COMMAND -->" and "<!-- readme-test: end -->".
struct Generated {
  int line = 0;         // of the opening marker
  std::string command;
  std::string text;
};

std::vector<Generated> generated_tables(const std::string& markdown) {
  std::vector<Generated> out;
  std::istringstream in(markdown);
  std::string line;
  int number = 0;
  const std::regex open(R"(^<!-- readme-test: table (.+?) -->$)");
  while (std::getline(in, line)) {
    ++number;
    std::smatch m;
    if (!std::regex_match(line, m, open)) continue;
    Generated g{number, m[1], ""};
    while (std::getline(in, line) && line != "<!-- readme-test: end -->") {
      ++number;
      g.text += line + "\n";
    }
    ++number;
    out.push_back(g);
  }
  return out;
}

std::string readme() { return testing::read_file(fs::path(DTSIM_SOURCE_DIR) / "README.md"); }

// Lines of a shell block with backslash continuations joined and comments dropped.
std::vector<std::string> command_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line, joined;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\\') {
      joined += line.substr(0, line.size() - 1);
      continue;
    }
    joined += line;
    if (auto hash = joined.find(" #"); hash != std::string::npos) joined.resize(hash);
    while (!joined.empty() && joined.back() == ' ') joined.pop_back();
    if (!joined.empty()) lines.push_back(joined);
    joined.clear();
  }
  return lines;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string makefile() { return testing::read_file(fs::path(DTSIM_SOURCE_DIR) / "Makefile"); }

bool make_has_target(const std::string& target) {
  return std::regex_search(makefile(), std::regex("(^|\n)" + target + ":"));
}

// The Makefile's recipe lines for a target (tab-indented lines after "target:").
std::vector<std::string> make_recipe(const std::string& target) {
  std::istringstream in(makefile());
  std::vector<std::string> recipe;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (inside && !line.empty() && line[0] == '\t') {
      recipe.push_back(line.substr(1));
      continue;
    }
    inside = line.rfind(target + ":", 0) == 0;
  }
  return recipe;
}

// A scratch directory laid out like the repository for what the README's commands touch:
// a copy of scenarios/ (runs write results next to their scenario), build/release/dtsim
// and `dtsim` on PATH, both the binary under test.
struct Scratch {
  fs::path dir = testing::fresh_dir("readme");
  Scratch() {
    fs::copy(fs::path(DTSIM_SOURCE_DIR) / "scenarios", dir / "scenarios", fs::copy_options::recursive);
    fs::create_directories(dir / "build" / "release");
    fs::create_directories(dir / "bin");
    fs::create_symlink(DTSIM_BINARY, dir / "build" / "release" / "dtsim");
    fs::create_symlink(DTSIM_BINARY, dir / "bin" / "dtsim");
  }
  testing::CommandResult bash(const std::string& script, int timeout_s = 300) const {
    const fs::path file = dir / fmt::format("block{}.sh", counter++);
    testing::write_file(file, "set -euo pipefail\n" + script);
    return testing::run_command(fmt::format("cd '{}' && PATH='{}':\"$PATH\" timeout {} bash '{}'", dir.string(),
                                            (dir / "bin").string(), timeout_s, file.string()));
  }
  mutable int counter = 0;
};

// Numbers on a line within a relative `tolerance`, everything else exactly.
bool same_line(const std::string& want, const std::string& got, double tolerance) {
  const auto a = words(want), b = words(got);
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    char* end_a = nullptr;
    char* end_b = nullptr;
    const double x = std::strtod(a[i].c_str(), &end_a), y = std::strtod(b[i].c_str(), &end_b);
    if (std::string(end_a) != std::string(end_b) || end_a == a[i].c_str()) return false;
    if (!(std::fabs(x - y) <= tolerance * std::max(std::fabs(x), std::fabs(y)))) return false;
  }
  return true;
}

void check_make(const Block& b) {
  for (const auto& line : command_lines(b.text)) {
    const auto w = words(line);
    ASSERT_GE(w.size(), 2U) << line;
    EXPECT_EQ(w[0], "make") << line;
    EXPECT_TRUE(make_has_target(w[1])) << "README line " << b.line << ": the Makefile has no target " << w[1];
  }
  EXPECT_NE(testing::read_file(fs::path(DTSIM_SOURCE_DIR) / ".ci" / "run").find("\nmake test"), std::string::npos)
      << ".ci/run must run the README's test command";
}

// The README's table is what the demo prints. Times, bits and bytes are exact on every
// machine and printed rounded, so they must match as text; the last line's loss,
// accuracy and consensus distance are floating-point results (the README's
// cross-machine contract), compared to 1e-4 relative: they move by ~1e-7 between CPUs,
// and the printed 6 digits could round either way.
void check_output_of(const Block& b, const Scratch& scratch) {
  ASSERT_EQ(b.argument, "make demo") << "README line " << b.line << ": only the demo's output is checked";
  std::string script;  // the recipe's run of dtsim (its other lines install and build)
  for (const auto& line : make_recipe("demo"))
    if (line.rfind("./build/release/dtsim ", 0) == 0) script += line + "\n";
  ASSERT_FALSE(script.empty());
  const auto out = scratch.bash(script);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  std::istringstream want(b.text), got(out.output);
  std::string w, g;
  int n = 0;
  while (std::getline(want, w)) {
    ++n;
    ASSERT_TRUE(static_cast<bool>(std::getline(got, g))) << "the demo printed fewer lines than README line " << b.line + n;
    const bool floats = w.rfind("final training loss", 0) == 0;
    EXPECT_TRUE(same_line(w, g, floats ? 1e-4 : 0.0))
        << "README line " << b.line + n << " says\n  " << w << "\nthe demo prints\n  " << g;
  }
  EXPECT_FALSE(static_cast<bool>(std::getline(got, g))) << "the demo prints more than the README shows: " << g;
}

// "dtsim run SCENARIO.json [--out DIR] ...; dtsim --help": every subcommand answers
// --help, and its help names every flag the line uses.
void check_usage(const Block& b, const Scratch& scratch) {
  for (const auto& line : command_lines(b.text)) {
    std::istringstream commands(line);
    for (std::string command; std::getline(commands, command, ';');) {
      const auto w = words(command);
      ASSERT_FALSE(w.empty());
      ASSERT_EQ(w[0], "dtsim") << command;
      const std::string sub = w.size() > 1 && w[1].rfind("--", 0) != 0 ? w[1] : "";
      const auto help = scratch.bash(fmt::format("dtsim {} --help", sub), 30);
      EXPECT_EQ(help.exit_code, 0) << command << "\n" << help.output;
      for (const auto& word : w) {
        static const std::regex flag(R"(\[?(--[a-z][a-z0-9-]*).*)");
        std::smatch m;
        if (std::regex_match(word, m, flag)) {
          EXPECT_NE(help.output.find(m[1].str()), std::string::npos)
              << "README line " << b.line << ": `dtsim " << sub << " --help` does not name " << m[1];
        }
      }
    }
  }
}

void check_run(const Block& b, const Scratch& scratch) {
  if (!testing::kHaveGloo && b.text.find("dtsim live ") != std::string::npos) {
    std::cout << "README line " << b.line << ": not run: " << testing::kNoGloo << "\n";
    return;
  }
  std::vector<fs::path> creates;
  if (b.argument.rfind("creates=", 0) == 0) {
    std::istringstream list(b.argument.substr(8));
    for (std::string f; std::getline(list, f, ',');) {
      creates.push_back(scratch.dir / f);
      fs::remove(creates.back());
    }
  }
  // A live job's rendezvous port: a free one, so parallel tests do not meet.
  const std::string script =
      std::regex_replace(b.text, std::regex("MASTER_PORT=[0-9]+"), fmt::format("MASTER_PORT={}", free_port()));
  const auto out = scratch.bash(script);
  EXPECT_EQ(out.exit_code, 0) << "README line " << b.line << ":\n" << b.text << "\n" << out.output;
  for (const auto& f : creates)
    EXPECT_TRUE(fs::exists(f) && fs::file_size(f) > 0)
        << "README line " << b.line << ": expected it to write " << f << "\n" << out.output;
}

// Cluster launchers are not on this machine: check what can rot without one, that the
// scenario named exists and that the launcher starts exactly the scenario's ranks (a
// live job needs one process per rank).
void check_launcher(const Block& b, const Scratch& scratch) {
  for (const auto& line : command_lines(b.text)) {
    const auto w = words(line);
    auto value_of = [&](const std::string& flag) -> long {
      for (std::size_t i = 0; i + 1 < w.size(); ++i)
        if (w[i] == flag) return std::stol(w[i + 1]);
      return -1;
    };
    long processes = -1;
    if (w[0] == "torchrun") processes = value_of("--nproc-per-node") * std::max(1L, value_of("--nnodes"));
    if (w[0] == "mpirun") processes = value_of("-np");
    if (w[0] == "srun")
      processes = value_of("-n") > 0 ? value_of("-n") : value_of("-N") * value_of("--ntasks-per-node");
    ASSERT_GT(processes, 0) << "README line " << b.line << ": unknown launcher or rank count in\n  " << line;
    const auto live = std::find(w.begin(), w.end(), "live");
    ASSERT_TRUE(live != w.end() && live + 1 != w.end()) << line;
    const fs::path scenario = scratch.dir / *(live + 1);
    ASSERT_TRUE(fs::exists(scenario)) << line;
    EXPECT_EQ(processes, testing::read_json(scenario).at("ranks").get<long>())
        << "README line " << b.line << ": the launcher starts " << processes << " processes for " << *(live + 1);
  }
}

void check_sweep_file(const Block& b, const Scratch& scratch) {
  const fs::path file = scratch.dir / b.argument;
  ASSERT_NO_THROW(json::parse(b.text)) << "README line " << b.line;
  testing::write_file(file, b.text);
  const auto out = scratch.bash(fmt::format("dtsim sweep '{}' --out results/readme_sweep_file --jobs 1", b.argument));
  EXPECT_EQ(out.exit_code, 0) << "README line " << b.line << ":\n" << out.output;
}

TEST(Readme, EveryFencedBlockSaysHowItIsChecked) {
  const auto blocks = fenced_blocks(readme());
  ASSERT_GE(blocks.size(), 8U);
  const std::set<std::string> kinds{"make", "output-of", "usage", "run", "launcher", "sweep-file", "text"};
  for (const auto& b : blocks)
    EXPECT_TRUE(kinds.count(b.kind)) << "README line " << b.line << ": a fenced block needs a <!-- readme-test: ... --> line"
                                     << " before it (tests/readme_test.cpp says which)";
}

TEST(Readme, MarkersAreRead) {
  // The reader itself: a marked block, an unmarked one, continuation lines.
  const auto blocks = fenced_blocks("<!-- readme-test: run creates=a,b -->\n```sh\nx \\\n  y # c\n```\ntext\n```\nz\n```\n");
  ASSERT_EQ(blocks.size(), 2U);
  EXPECT_EQ(blocks[0].kind, "run");
  EXPECT_EQ(blocks[0].argument, "creates=a,b");
  EXPECT_EQ(blocks[0].line, 2);
  EXPECT_EQ(command_lines(blocks[0].text), std::vector<std::string>{"x   y"});
  EXPECT_EQ(blocks[1].kind, "");
  EXPECT_EQ(blocks[1].line, 7);
  EXPECT_TRUE(same_line("loss: 0.346961 accuracy: 84.45%", "loss: 0.346962 accuracy: 84.45%", 1e-5));
  EXPECT_FALSE(same_line("loss: 0.346961 accuracy: 84.45%", "loss: 0.346961 accuracy: 84.46%", 1e-5));
  EXPECT_FALSE(same_line("5.264 us", "5.265 us", 0.0));
}

// The generated tables of one Markdown file are what their commands print.
void expect_generated_tables(const fs::path& file, std::size_t at_least) {
  const auto tables = generated_tables(testing::read_file(file));
  ASSERT_GE(tables.size(), at_least) << file;
  const Scratch scratch;
  for (const auto& t : tables) {
    ASSERT_EQ(t.command.rfind("dtsim list", 0), 0U) << file << " line " << t.line << ": " << t.command;
    const auto out = scratch.bash(t.command, 30);
    ASSERT_EQ(out.exit_code, 0) << out.output;
    EXPECT_EQ(t.text, out.output) << file << " line " << t.line << ": the table is not what `" << t.command
                                  << "` prints (paste its output between the markers)";
  }
  fs::remove_all(scratch.dir);
}

TEST(Readme, TablesAreWhatDtsimPrints) { expect_generated_tables(fs::path(DTSIM_SOURCE_DIR) / "README.md", 9); }

// docs/result_file.md describes the result file with `dtsim list results`' table.
TEST(Readme, ResultFileDocumentationIsWhatDtsimPrints) {
  expect_generated_tables(fs::path(DTSIM_SOURCE_DIR) / "docs" / "result_file.md", 1);
}

// In README order, in one scratch directory (the report reads the demo's result).
TEST(Readme, CommandsRunAsWritten) {
  const Scratch scratch;
  for (const auto& b : fenced_blocks(readme())) {
    SCOPED_TRACE(fmt::format("README.md:{} ({})", b.line, b.kind));
    if (b.kind == "make") check_make(b);
    if (b.kind == "output-of") check_output_of(b, scratch);
    if (b.kind == "usage") check_usage(b, scratch);
    if (b.kind == "run") check_run(b, scratch);
    if (b.kind == "launcher") check_launcher(b, scratch);
    if (b.kind == "sweep-file") check_sweep_file(b, scratch);
  }
  fs::remove_all(scratch.dir);
}

}  // namespace
}  // namespace dtsim
