// The nccl-tests table (network_models/nccl_table.hpp) that `dtsim collective` and
// dtsim_nccl_bench both write: its text layout and JSON for known rows, nccl-tests' bus
// bandwidth factors, a simulated table's and a measured one's JSON keys being the same,
// `dtsim collective --algo auto` naming the fastest algorithm per row, and the scenario
// schema's network models and algorithms being the tables' own.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "network_models/nccl/collective_time.hpp"
#include "network_models/nccl/nccl_model.hpp"
#include "network_models/nccl/presets.hpp"
#include "network_models/nccl_table.hpp"
#include "network_models/network_model.hpp"
#include "runner/collective_table.hpp"
#include "runner/schema.hpp"
#include "test_util.hpp"
#include "tests/nccl_curves.hpp"

namespace dtsim::net {
namespace {

using nlohmann::json;

// A measured row as bench/nccl_bench.cpp makes it.
NcclRow measured_row(int ranks, std::int64_t count, double seconds, std::int64_t wrong) {
  auto row = nccl_row(CollectiveKind::AllReduce, ranks, count * 4, count, static_cast<double>(count * 4), seconds);
  row.redop = "avg";
  row.wrong = wrong;
  return row;
}

NcclTable measured_table() {
  return {.source = TableSource::Measured,
          .op = NcclTestOp::AllReduce,
          .ranks = 2,
          .title = "dtsim_nccl_bench: all_reduce, 2 rank(s), fp32 avg in place, 5 warm-up + 20 timed per size",
          .setup = {{"benchmark", "nccl_all_reduce"}, {"iters", 20}, {"warmup", 5}},
          .rows = {measured_row(2, 2, 0x1p-17, 0), measured_row(2, 262144, 250e-6, 3)}};  // 2^-17 s: exact in JSON
}

TEST(NcclTable, BusFactorsAreNcclTests) {
  // nccl-tests' src/*.cu: allreduce 2(n-1)/n, reducescatter and allgather (n-1)/n, broadcast 1.
  const std::vector<std::pair<CollectiveKind, std::vector<double>>> want{
      {CollectiveKind::AllReduce, {0.0, 1.0, 1.75}},
      {CollectiveKind::ReduceScatter, {0.0, 0.5, 0.875}},
      {CollectiveKind::AllGather, {0.0, 0.5, 0.875}},
      {CollectiveKind::Broadcast, {1.0, 1.0, 1.0}}};
  for (const auto& [kind, factors] : want) {
    const std::vector<int> ranks{1, 2, 8};
    for (std::size_t i = 0; i < ranks.size(); ++i)
      EXPECT_DOUBLE_EQ(bus_factor(kind, ranks[i]), factors[i]) << to_string(kind) << " n=" << ranks[i];
  }
  // alltoall (n-1)/n; reduce and sendrecv 1; names as nccl-tests' binaries.
  const std::vector<std::pair<NcclTestOp, std::vector<double>>> more{{NcclTestOp::AllToAll, {0.0, 0.5, 0.875}},
                                                                     {NcclTestOp::Reduce, {1.0, 1.0, 1.0}},
                                                                     {NcclTestOp::SendRecv, {1.0, 1.0, 1.0}}};
  for (const auto& [op, factors] : more)
    for (std::size_t i = 0; i < factors.size(); ++i)
      EXPECT_DOUBLE_EQ(bus_factor(op, std::vector<int>{1, 2, 8}[i]), factors[i]) << to_string(op);
  for (auto op : {NcclTestOp::AllReduce, NcclTestOp::ReduceScatter, NcclTestOp::AllGather, NcclTestOp::Broadcast,
                  NcclTestOp::Reduce, NcclTestOp::SendRecv, NcclTestOp::AllToAll}) {
    const std::string name = to_string(op);
    EXPECT_EQ(runner::parse_test_op(name), op) << name;
    if (const auto kind = collective_kind(op)) {
      EXPECT_EQ(name, to_string(*kind));
    }
  }
  EXPECT_THROW(runner::parse_test_op("scatter"), std::invalid_argument);
  EXPECT_EQ(algbw_GBps(8e9, 2.0), 4.0);
  EXPECT_EQ(algbw_GBps(8.0, 0.0), 0.0);  // one rank: nothing to do, no time
}

TEST(NcclTable, SimulatedTextLayout) {
  // Rows of `dtsim collective --op allreduce --topology torus:8x8 --model flow` and of a
  // broadcast from root 3: the layout it printed before the table was shared.
  NcclTable t{.source = TableSource::Simulated,
              .op = NcclTestOp::AllReduce,
              .ranks = 64,
              .title = "dtsim collective: all_reduce on torus:8x8 (64 ranks), model flow, links 5 us / 12.5 GB/s"};
  auto row = nccl_row(CollectiveKind::AllReduce, 64, 8, 2, 8.0, 1260.0012800000027e-6);
  row.algorithm = "ring";
  t.rows.push_back(row);
  row = nccl_row(CollectiveKind::Broadcast, 64, 33554432, 8388608, 33554432.0, 8068.06e-6);
  row.root = 3;
  row.algorithm = "binomial";
  t.rows.push_back(row);
  EXPECT_EQ(format_nccl_table(t),
            "# dtsim collective: all_reduce on torus:8x8 (64 ranks), model flow, links 5 us / 12.5 GB/s\n"
            "#\n"
            "#         size        count     type  redop   root              algo     time(us)  algbw(GB/s)  busbw(GB/s)\n"
            "             8            2    float    sum     -1              ring      1260.00         0.00         0.00\n"
            "      33554432      8388608    float   none      3          binomial      8068.06         4.16         4.16\n"
            "# Avg bus bandwidth    : 2.0795\n");
}

TEST(NcclTable, MeasuredTextLayout) {
  const auto t = measured_table();
  EXPECT_EQ(nccl_table_header(t),
            "# dtsim_nccl_bench: all_reduce, 2 rank(s), fp32 avg in place, 5 warm-up + 20 timed per size\n"
            "#\n"
            "#         size        count     type  redop   root     time(us)  algbw(GB/s)  busbw(GB/s)   #wrong\n");
  EXPECT_EQ(nccl_table_row(t, t.rows[1]),
            "       1048576       262144    float    avg     -1       250.00         4.19         4.19        3\n");
  EXPECT_EQ(nccl_table_footer(t), "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 2.0977\n");
}

TEST(NcclTable, Json) {
  auto t = measured_table();
  t.rows.resize(1);
  EXPECT_EQ(nccl_table_json(t).dump(),
            R"({"op":"all_reduce","ranks":2,"rows":[{"algbw_GBps":0.001048576,"algorithm":null,"busbw_GBps":0.001048576,)"
            R"("bytes":8,"bytes_sent_per_rank":null,"count":2,"redop":"avg","root":-1,"time_us":7.62939453125,)"
            R"("type":"float",)"
            R"("wrong":0}],"setup":{"benchmark":"nccl_all_reduce","iters":20,"warmup":5},"source":"measured"})");
}

std::set<std::string> keys(const json& object) {
  std::set<std::string> out;
  for (const auto& [key, value] : object.items()) out.insert(key);
  return out;
}

// What `dtsim collective --json` writes and what dtsim_nccl_bench --json writes carry the
// same keys, at the top and in every row, so one can be diffed against the other.
TEST(NcclTable, SimulatedAndMeasuredJsonHaveTheSameKeys) {
  runner::CollectiveSweep sweep;
  sweep.topology = parse_topology("ring");
  sweep.ranks = 2;
  sweep.min_bytes = 8;
  sweep.max_bytes = 1 << 20;
  sweep.factor = 32;
  const json simulated = runner::collective_table_json(sweep, runner::run_collective_sweep(sweep));
  const json measured = nccl_table_json(measured_table());
  EXPECT_EQ(simulated["source"], "simulated");
  EXPECT_EQ(measured["source"], "measured");
  EXPECT_EQ(keys(simulated), keys(measured));
  ASSERT_EQ(simulated["rows"].size(), 4u);  // 8 B, 256 B, 8 KB, 256 KB
  for (const auto& rows : {simulated["rows"], measured["rows"]})
    for (const auto& row : rows) EXPECT_EQ(keys(row), keys(measured["rows"][0]));
  EXPECT_EQ(keys(measured["rows"][0]),
            (std::set<std::string>{"bytes", "count", "type", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps",
                                   "algorithm", "bytes_sent_per_rank", "wrong"}));
  EXPECT_EQ(simulated["rows"][0]["algorithm"], "ring");
  EXPECT_TRUE(simulated["rows"][0]["wrong"].is_null());
}

// `dtsim collective` with `--algo auto` (the default) chooses per size the candidate
// fastest on the simulated network and names it in each row, text and JSON: on an 8-rank
// ring with flows, no row is slower than any candidate's own sweep, every row's time is
// its named algorithm's, and the largest sizes go to the ring (issue 44: by closed form
// they went to halving-doubling, a third of the ring's bus bandwidth there).
TEST(CollectiveCommand, AutoNamesTheFastestAlgorithmInEveryRow) {
  const auto dir = testing::fresh_dir("collective_auto");
  const auto json_file = dir / "table.json";
  const auto run = testing::run_command(std::string(DTSIM_BINARY) + " collective -n 8 -b 1K -e 1G -f 16 --json " +
                                        json_file.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json table = testing::read_json(json_file);
  const auto& rows = table["rows"];
  ASSERT_EQ(rows.size(), 6u);  // 1K, 16K, 256K, 4M, 64M, 1G

  // The text's algo column (after size, count, type, redop, root) is the JSON's algorithm.
  std::istringstream text(run.output);
  std::vector<std::string> algo_column;
  for (std::string line; std::getline(text, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string field;
    for (int i = 0; i < 6; ++i) fields >> field;
    algo_column.push_back(field);
  }
  ASSERT_EQ(algo_column.size(), rows.size()) << run.output;

  runner::CollectiveSweep sweep;
  sweep.topology = parse_topology("ring");
  sweep.link = {5.0 * 1e-6, 12.5 * 1e9};  // as the command computes them from its default flags
  sweep.min_bytes = 1 << 10;
  sweep.max_bytes = std::int64_t{1} << 30;
  sweep.factor = 16;
  std::map<std::string, std::vector<runner::CollectiveRow>> by_candidate;
  for (Algorithm a : auto_candidates(CollectiveKind::AllReduce)) {
    sweep.algorithm = a;
    by_candidate[to_string(a)] = runner::run_collective_sweep(sweep);
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string chosen = rows[i]["algorithm"];
    SCOPED_TRACE(fmt::format("{} bytes: {}", rows[i]["bytes"].get<std::int64_t>(), chosen));
    EXPECT_EQ(algo_column[i], chosen);
    ASSERT_TRUE(by_candidate.count(chosen));
    EXPECT_EQ(rows[i]["time_us"].get<double>(), by_candidate[chosen][i].time_us);
    for (const auto& [name, candidate_rows] : by_candidate)
      EXPECT_LE(rows[i]["time_us"].get<double>(), candidate_rows[i].time_us) << name;
  }
  EXPECT_EQ(rows.back()["algorithm"], "ring");
  EXPECT_LT(by_candidate["ring"].back().time_us, by_candidate["halving_doubling"].back().time_us);
}

// sendrecv and alltoall are their messages, all sent at once: on uncontended links each
// takes its route's latency plus its bytes over the bandwidth; on a star with flows a
// rank's n - 1 alltoall messages share its link to the switch (and the switch's to it);
// on a described machine they share the GPUs' ports (port_flows.hpp). Reduce is the nccl
// model's alone, and sendrecv / alltoall have no algorithm to pick.
TEST(CollectiveCommand, SendRecvAndAllToAllAreTheirMessages) {
  runner::CollectiveSweep sweep;
  sweep.model = "alpha_beta";
  sweep.topology = parse_topology("complete");
  sweep.ranks = 8;
  sweep.link = {5e-6, 12.5e9};
  sweep.min_bytes = sweep.max_bytes = 16 << 20;
  const double S = 16 << 20, n = 8;
  sweep.op = NcclTestOp::SendRecv;
  auto rows = runner::run_collective_sweep(sweep);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].time_us, (5e-6 + S / 12.5e9) * 1e6, 1e-6);
  EXPECT_DOUBLE_EQ(rows[0].busbw_GBps, rows[0].algbw_GBps);
  EXPECT_EQ(rows[0].bytes_sent_per_rank, S);
  EXPECT_EQ(rows[0].algorithm, "direct");
  sweep.op = NcclTestOp::AllToAll;
  rows = runner::run_collective_sweep(sweep);
  EXPECT_NEAR(rows[0].time_us, (5e-6 + S / n / 12.5e9) * 1e6, 1e-6);
  EXPECT_DOUBLE_EQ(rows[0].busbw_GBps, rows[0].algbw_GBps * (n - 1) / n);
  EXPECT_EQ(rows[0].bytes_sent_per_rank, S / n * (n - 1));
  sweep.model = "flow";
  sweep.topology = parse_topology("star");
  rows = runner::run_collective_sweep(sweep);
  EXPECT_NEAR(rows[0].time_us, (2 * 5e-6 + (n - 1) * S / n / 12.5e9) * 1e6, 1e-6);

  // On 8x H100: a sendrecv message alone on its GPU's ports; alltoall's 7 per GPU share
  // its way out (and 7 its way in): each uses the share of the port its channels carry,
  // together more than the port, so all end together when the port has carried them all.
  runner::CollectiveSweep machine;
  machine.model = "nccl";
  auto config = std::make_shared<nccl::Config>();
  config->system = *nccl::find_system_preset("h100_8x");
  machine.nccl = config;
  machine.ranks = 8;
  machine.min_bytes = machine.max_bytes = 1 << 30;
  const nccl::Clock clock(config, 8);
  machine.op = NcclTestOp::SendRecv;
  rows = runner::run_collective_sweep(machine);
  EXPECT_NEAR(rows[0].time_us, nccl::p2p_us(clock.machine(), 0, 1, 1 << 30), 1e-6);
  EXPECT_EQ(rows[0].algorithm, "P2P/Simple");
  machine.op = NcclTestOp::AllToAll;
  rows = runner::run_collective_sweep(machine);
  const auto peer = nccl::p2p_timing(clock.machine(), 0, 1, (1 << 30) / 8);
  ASSERT_GT(7 * peer.share, 1.0);
  EXPECT_NEAR(rows[0].time_us, 7 * peer.share * peer.wire_us + peer.latency_us, 1e-6);
  // -g 8: the host's 8 launches bound a small one.
  machine.gpus_per_thread = 8;
  machine.min_bytes = machine.max_bytes = 1024;
  rows = runner::run_collective_sweep(machine);
  EXPECT_NEAR(rows[0].time_us, 8 * config->system.host.launch_us, 1e-9);
  EXPECT_EQ(rows[0].algorithm, "P2P/LL");

  // Reduce: NCCL's choice on the machine, refused elsewhere.
  machine.op = NcclTestOp::Reduce;
  machine.gpus_per_thread = 1;
  machine.min_bytes = machine.max_bytes = 1 << 26;
  rows = runner::run_collective_sweep(machine);
  const auto run = clock.run(nccl::Coll::Reduce, 1 << 26);
  EXPECT_DOUBLE_EQ(rows[0].time_us, run.gpu_us);
  EXPECT_EQ(rows[0].algorithm, nccl::describe(run.choice));
  EXPECT_DOUBLE_EQ(rows[0].busbw_GBps, rows[0].algbw_GBps);
  sweep.op = NcclTestOp::Reduce;
  EXPECT_THROW(runner::run_collective_sweep(sweep), std::invalid_argument);
  // Flags the command refuses, each with one line naming the flag (exit code 2).
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"-n 8 --op reduce", "--op reduce: only --model nccl"},
           {"-n 8 --op alltoall --algo ring", "--algo: alltoall sends its messages directly"},
           {"-n 2048 --op alltoall", "-n/--ranks: alltoall sends n (n - 1) messages per size; expected at most 1024"},
           {"--model nccl --system h100_8x --nodes 256 --op alltoall", "-n/--ranks: alltoall sends n (n - 1) messages"},
           {"-n 256 --topology fat_tree:8", "--topology: fat_tree: a 8-ary fat-tree holds at most 128 ranks, got 256"}}) {
    const auto refused = testing::run_command(std::string(DTSIM_BINARY) + " collective " + flags);
    EXPECT_EQ(refused.exit_code, 2) << flags << ": " << refused.output;
    EXPECT_NE(refused.output.find(message), std::string::npos) << flags << ": " << refused.output;
    EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << flags << ": " << refused.output;
  }
}

// `dtsim collective --against FILE`: nccl-tests' output of the development curve (8x A100,
// -g 8, NCCL_ALGO=NVLS), written as all_reduce_perf prints it with each time from the
// published busbw, gives back the validation's errors point by point (to the times'
// rounding to 0.01 us), its worst point, and refuses flags that contradict the file.
TEST(CollectiveCommand, AgainstAMeasuredRun) {
  const auto& curve = tests::published_curves().at(0);
  ASSERT_EQ(curve.system, "a100_8x");
  std::string text = "# nThread 1 nGpus 8 minBytes 1024 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
                     "#\n# Using devices\n";
  for (int r = 0; r < 8; ++r)
    text += fmt::format("#  Rank {:2} Group  0 Pid   7 on  host device {:2} [0x{:02x}] NVIDIA A100-SXM4-80GB\n", r, r, r);
  text += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  for (const auto& p : curve.points) {
    const double us = static_cast<double>(p.bytes) * 1.75 / (p.busbw_GBps * 1e3);
    const double algbw = static_cast<double>(p.bytes) / (us * 1e3);
    text += fmt::format("{:12} {:13} {:>9} {:>7} {:7} {:8.2f} {:7.2f} {:7.2f} {:6} {:8.2f} {:7.2f} {:7.2f} {:6}\n", p.bytes,
                        p.bytes / 4, "float", "sum", -1, us, algbw, p.busbw_GBps, 0, us, algbw, p.busbw_GBps, 0);
  }
  const auto dir = testing::fresh_dir("against");
  testing::write_file(dir / "a100.txt", text);
  const std::string base = std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --nccl-algo NVLS --nccl-version " +
                           curve.nccl_version + " --against " + (dir / "a100.txt").string();
  const auto run = testing::run_command(base + " --json " + (dir / "c.json").string() + " --svg " + (dir / "c.svg").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string figure = testing::read_file(dir / "c.svg");
  EXPECT_EQ(figure.rfind("<svg", 0), 0u);
  EXPECT_NE(figure.find("dtsim, model nccl"), std::string::npos);
  EXPECT_NE(figure.find("worst 44.0 % at 16777216 bytes"), std::string::npos);
  EXPECT_NE(run.output.find("worst 44.0 % (at 16777216 bytes)"), std::string::npos) << run.output;
  const json c = testing::read_json(dir / "c.json");
  EXPECT_EQ(c["op"], "all_reduce");
  EXPECT_EQ(c["ranks"], 8);
  EXPECT_EQ(c["setup"]["gpus_per_thread"], 8);
  ASSERT_EQ(c["rows"].size(), curve.points.size());
  // The validation's errors: predicted busbw on the same machine over the published busbw.
  auto config = std::make_shared<nccl::Config>();
  config->system = *nccl::find_system_preset("a100_8x");
  config->system.nccl = nccl::parse_nccl_release(curve.nccl_version);
  config->overrides = nccl::parse_overrides("NVLS", "");
  const nccl::Clock clock(config, 8);
  for (std::size_t i = 0; i < curve.points.size(); ++i) {
    const auto& p = curve.points[i];
    const json& row = c["rows"][i];
    CollectiveSpec spec{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = p.bytes / 4};
    const double predicted = algbw_GBps(static_cast<double>(p.bytes), clock.benchmark_seconds(spec, 8)) * 1.75;
    EXPECT_EQ(row["bytes"], p.bytes);
    EXPECT_NEAR(row["error"].get<double>(), predicted / p.busbw_GBps - 1, 2e-3 * (1 + predicted / p.busbw_GBps)) << p.bytes;
    EXPECT_EQ(row["algorithm"], clock.describe(spec)) << p.bytes;
  }
  EXPECT_EQ(c["summary"]["points"], static_cast<int>(curve.points.size()));
  EXPECT_EQ(c["summary"]["worst_bytes"], 16 << 20);
  // Flags that contradict the file, or sizes besides it: one line naming the flag.
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {" -n 16", "-n/--ranks: 16, but --against lists 8 ranks"},
           {" -g 1", "-g/--ngpus: 1, but --against ran nGpus 8"},
           {" -e 1G", "-e/--maxbytes: --against takes the sizes from its file"}}) {
    const auto refused = testing::run_command(base + flags);
    EXPECT_EQ(refused.exit_code, 2) << flags << ": " << refused.output;
    EXPECT_NE(refused.output.find(message), std::string::npos) << flags << ": " << refused.output;
    EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << flags << ": " << refused.output;
  }
  // NCCL 2.18 has no algorithm for NCCL_ALGO=NVLS on an A100; an unmodelled release is refused.
  for (const auto& [version, message] : std::vector<std::pair<std::string, std::string>>{
           {"2.18", "--nccl-algo: all_reduce: NCCL_ALGO leaves no algorithm that runs on 8 GPUs of \"a100_8x\", where NCCL 2.18 fails"},
           {"2.17.1", "--nccl-version: NCCL \"2.17.1\" is not modelled: expected " + dtsim::net::nccl::modelled_nccl_releases()}}) {
    const auto refused = testing::run_command(std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --nccl-algo NVLS "
                                              "--nccl-version " + version + " --against " + (dir / "a100.txt").string());
    EXPECT_EQ(refused.exit_code, 2) << version << ": " << refused.output;
    EXPECT_NE(refused.output.find(message), std::string::npos) << version << ": " << refused.output;
    EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << version << ": " << refused.output;
  }
  // The release the run printed is the one modelled; --nccl-version may agree with it, or pick
  // a modelled one for a release dtsim does not model, which is refused without it.
  const std::string nvls = std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --nccl-algo NVLS --against ";
  testing::write_file(dir / "2.20.5.txt", "NCCL version 2.20.5+cuda12.4\n" + text);
  testing::write_file(dir / "2.17.1.txt", "# nccl-tests version 2.13.10 nccl-headers=21701 nccl-library=21701\n" + text);
  const auto ran = testing::run_command(nvls + (dir / "2.20.5.txt").string());
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("model nccl (NCCL 2.20's choices, NCCL_ALGO=NVLS)"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("(NCCL 2.20.5 ran; in place;"), std::string::npos) << ran.output;
  const auto chosen = testing::run_command(nvls + (dir / "2.17.1.txt").string() + " --nccl-version 2.20");
  // NCCL_ALGO as the run printed it under NCCL_DEBUG=INFO: taken without --nccl-algo, which
  // may only agree with it.
  testing::write_file(dir / "info.txt", "h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to NVLS\nNCCL version 2.20.5+cuda12.4\n" + text);
  const std::string plain = std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --against " +
                            (dir / "info.txt").string();
  const auto info = testing::run_command(plain);
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("(NCCL 2.20's choices, NCCL_ALGO=NVLS)"), std::string::npos) << info.output;
  EXPECT_EQ(testing::run_command(plain + " --nccl-algo nvls").exit_code, 0);  // the same list, spelled otherwise
  const auto contradicted = testing::run_command(plain + " --nccl-algo Ring");
  EXPECT_EQ(contradicted.exit_code, 2) << contradicted.output;
  EXPECT_NE(contradicted.output.find("--nccl-algo: Ring, but --against ran with NVLS (line 1)"), std::string::npos)
      << contradicted.output;
  // The channel bounds the run printed (NCCL_PARAM's lines): taken, and named in the title; a
  // flag may only agree with them.
  testing::write_file(dir / "channels.txt", "h:1:1 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 4.\n"
                                            "NCCL version 2.20.5+cuda12.4\n" + text);
  const std::string bounded = std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --against " +
                              (dir / "channels.txt").string();
  const auto channels = testing::run_command(bounded);
  EXPECT_EQ(channels.exit_code, 0) << channels.output;
  EXPECT_NE(channels.output.find("(NCCL 2.20's choices, NCCL_MAX_NCHANNELS=4)"), std::string::npos) << channels.output;
  EXPECT_NE(channels.output.find("/4ch"), std::string::npos) << channels.output;
  EXPECT_EQ(channels.output.find("/24ch"), std::string::npos) << channels.output;
  EXPECT_EQ(testing::run_command(bounded + " --nccl-max-nchannels 4").exit_code, 0);
  const auto other = testing::run_command(bounded + " --nccl-max-nchannels 8");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("--nccl-max-nchannels: 8, but --against ran with NCCL_MAX_NCHANNELS 4 (line 1)"), std::string::npos)
      << other.output;
  // A printed count NCCL clamps is read as NCCL reads it: 128 as MAXCHANNELS (64 here), -1
  // (NCCL's own per-peer count) as 0; a step dtsim does not model is refused.
  testing::write_file(dir / "clamped.txt", "h:1:1 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 128.\n"
                                           "h:1:1 [0] NCCL INFO NCCL_NCHANNELS_PER_NET_PEER set by environment to -1.\n"
                                           "NCCL version 2.20.5+cuda12.4\n" + text);
  const auto clamped = testing::run_command(std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --against " +
                                            (dir / "clamped.txt").string());
  EXPECT_EQ(clamped.exit_code, 0) << clamped.output;
  EXPECT_NE(clamped.output.find("(NCCL 2.20's choices)"), std::string::npos) << clamped.output;  // both NCCL's own
  testing::write_file(dir / "step.txt", "h:1:1 [0] NCCL INFO NCCL_P2P_NET_CHUNKSIZE set by environment to 100.\n" + text);
  const auto step = testing::run_command(std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --nccl-version "
                                         "2.20 --against " + (dir / "step.txt").string());
  EXPECT_EQ(step.exit_code, 2) << step.output;
  EXPECT_NE(step.output.find("--against: line 1: NCCL_P2P_NET_CHUNKSIZE 100 is outside 4096 - 67108864"), std::string::npos)
      << step.output;
  // A printed value NCCL would not take, and a printed NCCL_ALGO the release cannot run
  // (2.18 on an A100 with NVLS): named as the file's.
  testing::write_file(dir / "rings.txt", "h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Rings\n" + text);
  testing::write_file(dir / "nvls_2_18.txt", "h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to NVLS\n" + text);
  for (const auto& [file, message] : std::vector<std::pair<std::string, std::string>>{
           {"rings.txt", "--against: line 1: NCCL_ALGO: unknown name \"Rings\""},
           {"nvls_2_18.txt", "--against (its NCCL_ALGO): all_reduce: NCCL_ALGO leaves no algorithm that runs on 8 GPUs"}}) {
    const auto refused = testing::run_command(std::string(DTSIM_BINARY) +
                                              " collective --model nccl --system a100_8x --nccl-version 2.18 --against " +
                                              (dir / file).string());
    EXPECT_EQ(refused.exit_code, 2) << file << ": " << refused.output;
    EXPECT_NE(refused.output.find(message), std::string::npos) << file << ": " << refused.output;
    EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << file << ": " << refused.output;
  }
  EXPECT_EQ(chosen.exit_code, 0) << chosen.output;
  EXPECT_NE(chosen.output.find("(NCCL 2.17.1 ran; in place;"), std::string::npos) << chosen.output;
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {(dir / "2.20.5.txt").string() + " --nccl-version 2.18", "--nccl-version: 2.18, but --against ran NCCL 2.20.5 (line 1)"},
           {(dir / "2.17.1.txt").string(), "--against: NCCL 2.17.1 ran (line 1), which dtsim does not model; compare it with a "
                                           "release it does: --nccl-version " + dtsim::net::nccl::modelled_nccl_releases()}}) {
    const auto refused = testing::run_command(nvls + args);
    EXPECT_EQ(refused.exit_code, 2) << args << ": " << refused.output;
    EXPECT_NE(refused.output.find(message), std::string::npos) << args << ": " << refused.output;
    EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << args << ": " << refused.output;
  }
  const auto no_against = testing::run_command(std::string(DTSIM_BINARY) + " collective -n 8 --svg " + (dir / "x.svg").string());
  EXPECT_EQ(no_against.exit_code, 2) << no_against.output;
  EXPECT_NE(no_against.output.find("--svg: draws the --against comparison (give --against FILE)"), std::string::npos)
      << no_against.output;
  testing::write_file(dir / "gather.txt", "# Collective test starting: all_gather_perf\n" + text);
  const auto op = testing::run_command(std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --op allreduce --against " +
                                       (dir / "gather.txt").string());
  EXPECT_EQ(op.exit_code, 2) << op.output;
  EXPECT_NE(op.output.find("--op: all_reduce, but --against measured all_gather"), std::string::npos) << op.output;
  // dtsim_nccl_bench --json's table: one rank per process, so one GPU per thread.
  NcclTable bench{.source = TableSource::Measured, .op = NcclTestOp::AllReduce, .ranks = 8,
                  .title = nccl_bench_title(NcclTestOp::AllReduce, 8, "fp32 sum in place")};
  bench.rows.push_back(measured_row(8, 1 << 20, 1e-4, 0));
  testing::write_file(dir / "bench.json", nccl_table_json(bench).dump(2));
  const auto from_json = testing::run_command(std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --against " +
                                              (dir / "bench.json").string());
  EXPECT_EQ(from_json.exit_code, 0) << from_json.output;
  EXPECT_NE(from_json.output.find(fmt::format("8 ranks: 1 node of 8), model nccl (NCCL {}'s choices), 1 GPU per thread",
                                               dtsim::net::nccl::nccl_releases().back().series)),
            std::string::npos) << from_json.output;
  EXPECT_NE(from_json.output.find("     4194304        100.00"), std::string::npos) << from_json.output;
  testing::write_file(dir / "broken.json", "{ \"source\": ");
  const auto broken = testing::run_command(std::string(DTSIM_BINARY) + " collective --against " + (dir / "broken.json").string());
  EXPECT_EQ(broken.exit_code, 2) << broken.output;
  EXPECT_NE(broken.output.find("broken.json: not JSON (dtsim_nccl_bench --json writes it)"), std::string::npos) << broken.output;
  // A size no -e would take.
  testing::write_file(dir / "huge.txt", "1152921504606846976 288230376151711744 float sum -1 1.0 0 0 0 1.0 0 0 0\n");
  for (const std::string model : {"--model nccl --system a100_8x", "--model flow"}) {
    const auto huge = testing::run_command(std::string(DTSIM_BINARY) + " collective -n 8 " + model + " --against " +
                                           (dir / "huge.txt").string());
    EXPECT_EQ(huge.exit_code, 2) << huge.output;
    EXPECT_NE(huge.output.find("--against: line 1: size 1152921504606846976 is beyond 2^50 bytes"), std::string::npos)
        << huge.output;
  }
  // Ranks that do not fill whole nodes of the system: the file's, so the error names --against.
  std::string twelve = "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576\n";
  for (int r = 0; r < 12; ++r)
    twelve += fmt::format("#  Rank {:2} Group  0 Pid 1 on n{} device {} [0x0] NVIDIA A100-SXM4-80GB\n", r, r / 8, r % 8);
  twelve += "1048576 262144 float sum -1 100.0 10.49 19.66 0 100.0 10.49 19.66 0\n";
  testing::write_file(dir / "twelve.txt", twelve);
  const auto partial = testing::run_command(std::string(DTSIM_BINARY) + " collective --model nccl --system a100_8x --against " +
                                            (dir / "twelve.txt").string());
  EXPECT_EQ(partial.exit_code, 2) << partial.output;
  EXPECT_NE(partial.output.find("--against (the ranks it lists): 12 ranks do not fill whole nodes of 8 GPUs"), std::string::npos)
      << partial.output;
  const auto missing = testing::run_command(std::string(DTSIM_BINARY) + " collective --against " + (dir / "none.txt").string());
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("--against: cannot read"), std::string::npos) << missing.output;
  std::filesystem::remove_all(dir);
}

// scenario.schema.json lists the network models and the algorithms per collective too;
// they must be the tables' (network_model.hpp, schedule.hpp), with the tables' wording.
// What a release cannot run is refused in one line naming the flag: Blackwell before 2.25,
// lists per collective before 2.24. A job with one GPU per node runs (PAT or not).
TEST(CollectiveCommand, ReleaseLimits) {
  const auto dir = testing::fresh_dir("release_limits");
  testing::write_file(dir / "singles.json", R"({"preset": "h100_8x", "gpus_per_node": 1, "sockets": 1, "nodes": 4,
                                                "nccl_version": "2.23"})");
  const std::string nccl = std::string(DTSIM_BINARY) + " collective --model nccl -e 1M ";
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--system b200_8x --nccl-version 2.24", "--nccl-version: NCCL 2.24 does not run Blackwell GPUs; 2.25 and later do"},
           {"--system a100_8x --nccl-version 2.18 --nccl-algo 'ring;allreduce:tree'",
            "--nccl-algo: NCCL_ALGO / NCCL_PROTO: lists per collective (\"ring;allreduce:tree\", \"\") are read from NCCL 2.24; "
            "2.18 does not"}}) {
    const auto refused = testing::run_command(nccl + flags);
    EXPECT_EQ(refused.exit_code, 2) << flags << ": " << refused.output;
    EXPECT_NE(refused.output.find(message), std::string::npos) << flags << ": " << refused.output;
    EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << flags << ": " << refused.output;
  }
  // The same with what each needs: 2.25 for Blackwell, 2.24 for the lists; one GPU per node
  // with PAT (what 2.23 runs up to 1 MiB there) and without.
  for (const auto& [flags, algo] : std::vector<std::pair<std::string, std::string>>{
           {"--system b200_8x", ""},
           {"--system a100_8x --nccl-version 2.24 --nccl-algo 'ring;allreduce:tree'", ""},
           {"--system " + (dir / "singles.json").string() + " -n 4 --op allgather", "PAT/Simple"},
           {"--system " + (dir / "singles.json").string() + " -n 4 --op allgather --nccl-algo ^PAT", "Ring/"}}) {
    const auto ran = testing::run_command(nccl + flags);
    EXPECT_EQ(ran.exit_code, 0) << flags << ": " << ran.output;
    EXPECT_NE(ran.output.find(algo), std::string::npos) << flags << ": " << ran.output;
  }
}

TEST(NetworkModelTable, MatchesTheScenarioSchema) {
  const json& network = runner::scenario_schema()["$defs"]["network"]["properties"];
  std::vector<std::string> names;
  std::string description;
  for (const auto& m : network_model_table()) {
    names.emplace_back(m.name);
    description += (description.empty() ? "" : "; ") + std::string(m.name) + ": " + std::string(m.description);
  }
  EXPECT_EQ(network["model"]["enum"].get<std::vector<std::string>>(), names);
  EXPECT_EQ(network["model"]["description"], description);
  for (auto kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                    CollectiveKind::Broadcast}) {
    std::vector<std::string> algorithms{"auto"};
    for (auto a : algorithms_for(kind)) algorithms.emplace_back(to_string(a));
    EXPECT_EQ(network["algorithms"]["properties"][to_string(kind)]["enum"].get<std::vector<std::string>>(), algorithms)
        << to_string(kind);
  }
}

}  // namespace
}  // namespace dtsim::net
