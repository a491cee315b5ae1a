// net::NcclTestsRun: what nccl-tests printed for one run (all_reduce_perf and its siblings'
// stdout, as users keep it or paste it into an issue), read back so `dtsim collective
// --against FILE` can put the model's prediction beside each measured size.
//
// Read from the text:
//   "# Collective test starting: all_reduce_perf"   the operation, where printed
//   "# nccl-tests version 2.13.8 nccl-headers=21805 nccl-library=21805", or NCCL's
//   "NCCL version 2.18.5+cuda12.2" (NCCL_DEBUG=VERSION)  the NCCL release that ran
//   "... NCCL INFO NCCL_ALGO set by environment to NVLS" (NCCL_DEBUG=INFO), and NCCL_PROTO
//   "# nThread 1 nGpus 8 minBytes ..."               threads per process, GPUs per thread (-g)
//   "#  Rank  3 Group  0 Pid ... device  3 [..] NVIDIA A100-SXM4-80GB"
//                                                    one line per rank of the job
//   rows: size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong
//         (out-of-place, then in-place; older nccl-tests print no root, and "error" in
//         place of #wrong; the oldest, which print no redop and whose size column counts
//         every rank's buffer, are refused)
// Lines may carry mpirun's "[1,0]<stdout>:" prefix; the leading '#' of the header lines may
// be missing (as pasted); other lines (NCCL INFO, warnings, the footer) are skipped.
// dtsim_nccl_bench's table reads too (its title gives the operation and ranks; one time,
// in place, per size); dtsim collective's prediction is refused.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "network_models/nccl_table.hpp"

namespace dtsim::net {

struct NcclTestsPoint {
  std::int64_t bytes = 0, count = 0;
  std::string type, redop;  // redop "" where the run printed none
  int root = -1;
  double out_of_place_us = 0.0, out_of_place_busbw_GBps = 0.0;
  double in_place_us = 0.0, in_place_busbw_GBps = 0.0;
  int line = 0;  // in the text, from 1
};

struct NcclTestsRun {
  std::optional<NcclTestOp> op;  // where the run printed "Collective test starting"
  int threads = 0;               // nThread (0: not printed)
  int gpus_per_thread = 0;       // nGpus, nccl-tests' -g (0: not printed)
  int ranks = 0;                 // the ranks listed under "Using devices" (0: none listed)
  std::vector<std::string> devices;  // each listed rank's device, in rank order ("NVIDIA A100-SXM4-80GB")
  std::string nccl_version;          // the NCCL library that ran, "2.18.5" ("": not printed)
  int nccl_version_line = 0;         // where it was first printed
  // NCCL_ALGO and NCCL_PROTO as NCCL printed them under NCCL_DEBUG=INFO ("": not printed),
  // and where.
  std::string nccl_algo, nccl_proto;
  int nccl_algo_line = 0, nccl_proto_line = 0;
  // NCCL's integer parameters as it printed them under NCCL_DEBUG=INFO ("NCCL_MAX_NCHANNELS
  // set by environment to 8."), by name, with the line each was first printed on.
  struct PrintedParam {
    long long value = 0;
    int line = 0;
  };
  std::map<std::string, PrintedParam> nccl_params;
  std::vector<NcclTestsPoint> points;  // in the order printed, each size once
};

// Throws std::invalid_argument "line N: ..." for a row that is not nccl-tests' (too few or
// too many columns, no redop, a size or time that is not a number), a size printed twice (two runs'
// output in one text), ranks listed out of order, two NCCL releases or two values of
// NCCL_ALGO or NCCL_PROTO or of an integer parameter, and a text with no rows.
NcclTestsRun parse_nccl_tests_output(std::string_view text);

// dtsim_nccl_bench's measurement as its --json writes it (nccl_table.hpp's JSON, "source":
// "measured"): the operation, ranks (one GPU per process), the NCCL release
// ("setup"/"nccl_version", where written) and each size's in-place time and busbw. Throws std::invalid_argument "JSON-PATH: ..." for another document, a prediction
// ("source": "simulated"), a row without its size, time or busbw, a size measured twice.
NcclTestsRun measured_table_from_json(const nlohmann::json& doc);

}  // namespace dtsim::net
