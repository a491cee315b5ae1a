// net::parse_nccl_tests_output (network_models/nccl_tests_output.hpp): nccl-tests' stdout
// in the layouts its versions print (root and #wrong columns, or neither; the '#' of the
// header lines kept or lost in pasting; mpirun's prefixes), the errors that name the line,
// and net::summarize_errors (network_models/prediction_error.hpp) against its closed forms.
#include "network_models/nccl_tests_output.hpp"
#include "network_models/prediction_error.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

namespace dtsim::net {
namespace {

// Today's layout: the release line, "Collective test starting", ranks with groups, root and
// #wrong columns.
constexpr const char* kCurrent = R"(# nccl-tests version 2.13.9 (59072b7) nccl-headers=22005 nccl-library=22005
# Collective test starting: all_gather_perf
# nThread 1 nGpus 4 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  11 on      node1 device  0 [0x07] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  11 on      node1 device  1 [0x0b] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  11 on      node1 device  2 [0x48] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  11 on      node1 device  3 [0x4c] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024            64     float    none      -1    12.50    0.08    0.06      0    12.25    0.08    0.06      0
        2048           128     float    none      -1    12.75    0.16    0.12    N/A    13.00    0.16    0.12    N/A
        4096           256     float    none      -1    24410    0.00    0.00      0    24425    0.00    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.06
#
)";

TEST(NcclTestsOutput, ReadsTodaysLayout) {
  const auto run = parse_nccl_tests_output(kCurrent);
  ASSERT_TRUE(run.op.has_value());
  EXPECT_EQ(*run.op, NcclTestOp::AllGather);
  EXPECT_EQ(run.threads, 1);
  EXPECT_EQ(run.gpus_per_thread, 4);
  EXPECT_EQ(run.ranks, 4);
  ASSERT_EQ(run.devices.size(), 4u);
  EXPECT_EQ(run.devices[2], "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(run.points.size(), 3u);
  const auto& p = run.points[0];
  EXPECT_EQ(p.bytes, 1024);
  EXPECT_EQ(p.count, 64);
  EXPECT_EQ(p.type, "float");
  EXPECT_EQ(p.redop, "none");
  EXPECT_EQ(p.root, -1);
  EXPECT_DOUBLE_EQ(p.out_of_place_us, 12.50);
  EXPECT_DOUBLE_EQ(p.in_place_us, 12.25);
  EXPECT_DOUBLE_EQ(p.in_place_busbw_GBps, 0.06);
  EXPECT_EQ(p.line, 14);
  EXPECT_EQ(run.nccl_version, "2.20.5");
  EXPECT_EQ(run.nccl_version_line, 1);
  EXPECT_DOUBLE_EQ(run.points[1].in_place_us, 13.00);  // "N/A" in #wrong
  EXPECT_DOUBLE_EQ(run.points[2].in_place_us, 24425);  // a time without decimals
}

// 2021's layout as pasted into an issue: no '#', no root column, "error" for #wrong;
// mpirun's prefixes. (The oldest rows, without a redop, are refused: ErrorsNameTheLine.)
TEST(NcclTestsOutput, ReadsOlderLayoutsAndLauncherPrefixes) {
  const auto old = parse_nccl_tests_output(
      "nThread 1 nGpus 2 minBytes 32 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
      "\n"
      "Using devices\n"
      "  Rank  0 Pid 15 on host device  0 [0x00] NVIDIA A100-SXM4-40GB\n"
      "  Rank  1 Pid 15 on host device  1 [0x00] NVIDIA A100-SXM4-40GB\n"
      "\n"
      "       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
      "          32             8     float     sum    10.14    0.00    0.00  0e+00    10.21    0.00    0.00  0e+00\r\n"
      "          64            16     float     sum    10.14    0.01    0.01  0e+00    10.31    0.01    0.01  0e+00\n");
  EXPECT_FALSE(old.op.has_value());
  EXPECT_EQ(old.gpus_per_thread, 2);
  EXPECT_EQ(old.ranks, 2);
  ASSERT_EQ(old.points.size(), 2u);
  EXPECT_EQ(old.points[1].redop, "sum");
  EXPECT_EQ(old.nccl_version, "");
  EXPECT_EQ(old.points[1].root, -1);
  EXPECT_DOUBLE_EQ(old.points[1].in_place_us, 10.31);

  const auto mpi = parse_nccl_tests_output(
      "[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor)\n"
      "[1,0]<stdout>:#  Rank  0 Group  0 Pid 1 on a device  0 [0x18] NVIDIA H100 80GB HBM3\n"
      "[1,0]<stdout>:#  Rank  1 Group  0 Pid 2 on b device  0 [0x18] NVIDIA H100 80GB HBM3\n"
      "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE\n"
      "[1,0]<stdout>:           8             2     float     sum      -1    12.90    0.00    0.00      0    12.87    0.00    0.00      0\n");
  EXPECT_EQ(mpi.ranks, 2);
  EXPECT_EQ(mpi.gpus_per_thread, 1);
  ASSERT_EQ(mpi.points.size(), 1u);
  EXPECT_DOUBLE_EQ(mpi.points[0].in_place_us, 12.87);

  // The release from NCCL's own log (NCCL_DEBUG=VERSION or INFO), every rank printing it, and
  // from nccl-tests' code before NCCL 2.9 (X * 1000 + Y * 100 + Z).
  const std::string row = "8 2 float sum -1 12.90 0.00 0.00 0 12.87 0.00 0.00 0\n";
  EXPECT_EQ(parse_nccl_tests_output("NCCL version 2.18.5+cuda12.2\n" + row).nccl_version, "2.18.5");
  EXPECT_EQ(parse_nccl_tests_output("a:1:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2\n"
                                    "b:2:2 [1] NCCL INFO NCCL version 2.18.5+cuda12.2\n" + row).nccl_version_line, 1);
  EXPECT_EQ(parse_nccl_tests_output("# nccl-tests version 2.10.0 nccl-headers=2708 nccl-library=2708\n" + row).nccl_version, "2.7.8");
  EXPECT_EQ(parse_nccl_tests_output("NCCL version unknown\n" + row).nccl_version, "");

  // NCCL_ALGO and NCCL_PROTO as NCCL_DEBUG=INFO prints them, from every rank.
  const auto env = parse_nccl_tests_output("a:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring,Tree\n"
                                           "a:1:1 [1] NCCL INFO NCCL_ALGO set by environment to Ring,Tree\n"
                                           "a:1:1 [0] NCCL INFO NCCL_PROTO set by environment to ^LL128\n" + row);
  EXPECT_EQ(env.nccl_algo, "Ring,Tree");
  EXPECT_EQ(env.nccl_algo_line, 1);
  EXPECT_EQ(env.nccl_proto, "^LL128");
  EXPECT_EQ(env.nccl_proto_line, 3);
  EXPECT_EQ(old.nccl_algo, "");

  // NCCL's integer parameters (NCCL_PARAM's "NAME set by environment to VALUE."), by name.
  const auto params = parse_nccl_tests_output("a:1:1 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 8.\n"
                                              "a:1:1 [1] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 8.\n"
                                              "a:1:1 [0] NCCL INFO NCCL_MIN_CTAS set by environment to 2.\n" + row);
  ASSERT_EQ(params.nccl_params.size(), 2u);
  EXPECT_EQ(params.nccl_params.at("NCCL_MAX_NCHANNELS").value, 8);
  EXPECT_EQ(params.nccl_params.at("NCCL_MAX_NCHANNELS").line, 1);
  EXPECT_EQ(params.nccl_params.at("NCCL_MIN_CTAS").line, 3);
  EXPECT_TRUE(env.nccl_params.empty());
}

// Each refusal names its line.
TEST(NcclTestsOutput, ErrorsNameTheLine) {
  auto message = [](const std::string& text) {
    try {
      parse_nccl_tests_output(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string row = "        1024   256   float   sum   -1   10.0  0.1  0.2  0   10.0  0.1  0.2  0\n";
  EXPECT_EQ(message(""), "no nccl-tests rows (size count type redop root time algbw busbw ...) in the text");
  EXPECT_EQ(message("# only comments\n"), "no nccl-tests rows (size count type redop root time algbw busbw ...) in the text");
  EXPECT_EQ(message(row + row), "line 2: size 1024 printed again (first on line 1): is this two runs' output?");
  EXPECT_EQ(message("1024 256 float sum -1 10.0 0.1\n"),
            "line 1: expected nccl-tests' columns (size count type redop [root], then time algbw busbw #wrong out of "
            "place and in place), got 7 columns");
  EXPECT_EQ(message("1024 256 float sum -1 10.0 0.1 0.2 0 ten 0.1 0.2 0\n"), "line 1: in-place time \"ten\" is not a number >= 0");
  EXPECT_EQ(message("1024 256 float sum -1 10.0 0.1 0.2 0 -3 0.1 0.2 0\n"), "line 1: in-place time \"-3\" is not a number >= 0");
  EXPECT_EQ(message("1024 256 float sum x 10.0 0.1 0.2 0 10 0.1 0.2 0 1\n"),
            "line 1: expected nccl-tests' columns (size count type redop [root], then time algbw busbw #wrong out of "
            "place and in place), got 14 columns");
  EXPECT_EQ(message("1024 many float sum -1 10.0 0.1 0.2 0 10 0.1 0.2 0\n"),
            "line 1: expected a row of nccl-tests (size count type ...)");
  EXPECT_EQ(message("# Collective test starting: gather_perf\n" + row),
            "line 1: gather_perf: dtsim times all_reduce, reduce_scatter, all_gather, broadcast, reduce, sendrecv and "
            "alltoall, not this test");
  EXPECT_EQ(message("#  Rank  1 Group 0 Pid 1 on a device  1 [0x1] GPU\n" + row), "line 1: rank 1 listed where rank 0 was expected");
  EXPECT_EQ(message("#  Rank  0 Group 0 Pid 1 on a device  0 [0x1] GPU\n#  Rank  0 Group 0 Pid 1 on a device  0 [0x1] GPU\n" + row),
            "line 2: rank 0 listed again (first on line 1): is this two runs' output?");
  EXPECT_EQ(message("# nThread 0 nGpus 8 minBytes 8\n" + row), "line 1: nThread / nGpus are not counts");
  EXPECT_EQ(message("# nccl-tests version 2.13.9 nccl-headers=21805 nccl-library=21805\n" + row + "NCCL version 2.20.5+cuda12.3\n"),
            "line 3: NCCL 2.20.5, but line 1 printed NCCL 2.18.5: is this two runs' output?");
  EXPECT_EQ(message("x NCCL INFO NCCL_ALGO set by environment to Ring\n" + row + "x NCCL INFO NCCL_ALGO set by environment to NVLS\n"),
            "line 3: NCCL_ALGO NVLS, but line 1 printed Ring: is this two runs' output?");
  EXPECT_EQ(message("x NCCL INFO NCCL_MAX_NCHANNELS set by environment to 8.\n" + row +
                    "x NCCL INFO NCCL_MAX_NCHANNELS set by environment to 4.\n"),
            "line 3: NCCL_MAX_NCHANNELS 4, but line 1 printed 8: is this two runs' output?");
  EXPECT_EQ(message("       32768          4096   float    13.39    1.22    1.22  0e+00    11.85    1.38    1.38  0e+00\n"),
            "line 1: no redop column: an old nccl-tests, whose size column counts every rank's buffer; rerun with a "
            "current one");
}

// dtsim_nccl_bench's table, printed or as its --json: the operation and ranks from it, one
// in-place time per size. dtsim collective's prediction is not a measurement.
TEST(NcclTestsOutput, ReadsDtsimNcclBench) {
  NcclTable table{.source = TableSource::Measured,
                  .op = NcclTestOp::AllReduce,
                  .ranks = 4,
                  .title = nccl_bench_title(NcclTestOp::AllReduce, 4, "fp32 sum in place, 5 warm-up + 20 timed per size"),
                  .setup = {{"nccl_version", "2.20.5"}}};
  for (std::int64_t count : {256, 262144}) {
    auto row = nccl_row(NcclTestOp::AllReduce, 4, count * 4, count, static_cast<double>(count * 4), 2e-5 + count * 1e-11);
    row.wrong = 0;
    table.rows.push_back(row);
  }
  // The bench prints the library's release above its table, as NCCL_DEBUG=VERSION does, and
  // writes it into its JSON's setup.
  for (const auto& run : {parse_nccl_tests_output("# NCCL version 2.20.5\n" + format_nccl_table(table)),
                          measured_table_from_json(nccl_table_json(table))}) {
    EXPECT_EQ(run.nccl_version, "2.20.5");
    ASSERT_TRUE(run.op.has_value());
    EXPECT_EQ(*run.op, NcclTestOp::AllReduce);
    EXPECT_EQ(run.ranks, 4);
    EXPECT_EQ(run.gpus_per_thread, 1);
    ASSERT_EQ(run.points.size(), 2u);
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(run.points[k].bytes, table.rows[k].bytes);
      EXPECT_NEAR(run.points[k].in_place_us, table.rows[k].time_us, 0.005);  // the text's 2 decimals
      EXPECT_NEAR(run.points[k].in_place_busbw_GBps, table.rows[k].busbw_GBps, 0.005);
    }
  }
  auto message = [](const nlohmann::json& doc) {
    try {
      measured_table_from_json(doc);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const nlohmann::json measured = nccl_table_json(table);
  auto with = [&](const std::string& pointer, nlohmann::json value) {
    nlohmann::json doc = measured;
    doc[nlohmann::json::json_pointer(pointer)] = std::move(value);
    return doc;
  };
  EXPECT_EQ(message(with("/source", "simulated")), "/source: \"simulated\": this is not a measurement");
  EXPECT_EQ(message(with("/setup/nccl_version", 22005)), "/setup/nccl_version: expected the NCCL release that ran, as \"2.20.5\"");
  EXPECT_EQ(message(with("/setup/nccl_version", "")), "/setup/nccl_version: expected the NCCL release that ran, as \"2.20.5\"");
  EXPECT_EQ(message(with("/op", "gather")), "/op: \"gather\": dtsim times all_reduce, reduce_scatter, all_gather, broadcast, "
                                            "reduce, sendrecv and alltoall");
  EXPECT_EQ(message(with("/ranks", 0)), "/ranks: expected a rank count");
  EXPECT_EQ(message(with("/rows", nlohmann::json::array())), "/rows: expected the measured rows");
  EXPECT_EQ(message(with("/rows/1/time_us", -1)), "/rows/1/time_us: expected a number >= 0");
  EXPECT_EQ(message(with("/rows/1/bytes", 1024)), "/rows/1/bytes: size 1024 measured again (first at /rows/0)");
  EXPECT_EQ(message(nlohmann::json::array()), "/: expected a table of dtsim_nccl_bench --json (an object)");
  NcclTable predicted = table;
  predicted.source = TableSource::Simulated;
  predicted.title = "dtsim collective: all_reduce on ring (4 ranks), model flow, links 5 us / 12.5 GB/s";
  try {
    parse_nccl_tests_output(format_nccl_table(predicted));
    ADD_FAILURE() << "a prediction was read as a measurement";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "line 1: this is dtsim collective's prediction, not a measurement");
  }
}

// Median, geometric mean and worst of |error|, over the points at or above the threshold.
TEST(PredictionError, SummaryOfAbsoluteErrors) {
  const std::vector<PointError> points{{1024, 0.5}, {2048, -0.1}, {4096, 0.2}, {8192, -0.4}};
  const auto all = summarize_errors(points);
  EXPECT_EQ(all.points, 4);
  EXPECT_DOUBLE_EQ(all.median, (0.2 + 0.4) / 2);
  EXPECT_NEAR(all.geomean, std::pow(0.5 * 0.1 * 0.2 * 0.4, 0.25), 1e-15);
  EXPECT_DOUBLE_EQ(all.worst, 0.5);
  EXPECT_EQ(all.worst_bytes, 1024);
  const auto large = summarize_errors(points, 2048);
  EXPECT_EQ(large.points, 3);
  EXPECT_DOUBLE_EQ(large.median, 0.2);
  EXPECT_DOUBLE_EQ(large.worst, 0.4);
  EXPECT_EQ(large.worst_bytes, 8192);
  const auto none = summarize_errors({}, 0);
  EXPECT_EQ(none.points, 0);
  EXPECT_EQ(none.worst, 0.0);
}

}  // namespace
}  // namespace dtsim::net
