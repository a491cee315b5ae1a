// dtsim_nccl_bench: all-reduce bandwidth through dtsim's own NCCL backend
// (comm/nccl.hpp), measured as nccl-tests' all_reduce_perf measures it, so the figures
// line up with `dtsim collective`'s predicted table and with nccl-tests on the same GPUs.
//
//   dtsim_nccl_bench [-b 8] [-e 1G] [-f 2] [-n 20] [-w 5] [--json FILE]
//
// Without RANK/WORLD_SIZE (or another launcher's variables, comm/live_env.hpp) it is rank
// 0 of a one-rank job whose rendezvous (the TCP store `dtsim live --backend nccl` uses) is
// on a free loopback port: the GPU machines lent to dtsim have one GPU, and NCCL refuses
// two ranks on one device. Under torchrun it is one rank of a larger job.
//
// Per size: fp32 in place on a CUDA tensor, summed (--op sum) or averaged (--op avg). First
// a check: every rank fills rank + 1, one all-reduce, and #wrong counts elements that
// differ from n(n+1)/2 (sum) or (n+1)/2 (avg). Then `warmup` untimed and `iters` timed
// all-reduces issued back to back (one buffer each: at 1 GB and 20 iterations, 20 GB of
// device memory), and the awaits of all of them after the last is issued (each await
// waits on the host until its operation is done):
//   time  = that batch's wall time / iters
//   algbw = bytes / time (1e9 bytes/s)
//   busbw = algbw * 2 (n - 1) / n, nccl-tests' all-reduce factor
// The table (text and --json) is network_models/nccl_table.hpp's, the one `dtsim
// collective --json` writes for its prediction, so the two can be diffed; above it the
// NCCL library's release, "# NCCL version 2.20.5" (in the JSON: setup/nccl_version), which
// `dtsim collective --against` models.
// With one rank busbw is 0 by that definition (nothing crosses between GPUs), and NCCL
// does nothing at all for an in-place sum (its one-rank path is a no-op): algbw would be
// the host's per-call cost alone, growing with the size without bound. So one rank
// averages by default (--op auto): NCCL then runs a kernel that reads and writes the
// buffer (scaling by 1/1), and algbw is that pass plus the per-call cost, to compare with
// a device copy (which moves 2 x bytes). The check cannot catch a no-op with one rank.
//
// Where it cannot run (a LibTorch without CUDA, no device, no NCCL) it says why, writes
// {"skipped": reason} to --json, and exits 0: scripts/gpu-check.sh runs it everywhere.
#include <CLI/CLI.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "comm/live_env.hpp"
#include "comm/nccl.hpp"
#include "network_models/nccl_table.hpp"

namespace {

using namespace dtsim;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

comm::LiveEnv job_env() {
  const bool launched = std::getenv("RANK") || std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK") ||
                        std::getenv("SLURM_PROCID");
  if (launched) return comm::LiveEnv::from_environment();
  comm::LiveEnv env;  // rank 0 of 1, LOCAL_RANK 0
  env.master_port = comm::free_loopback_port();
  env.timeout = std::chrono::milliseconds(30000);
  return env;
}

void complete(comm::Op op) {
  if (!op.await_ready()) throw std::logic_error("nccl: an operation asked to suspend");
  op.await_resume();
}

// `count` all-reduces issued back to back, then awaited in order; one buffer each, since a
// buffer may not be touched again before its operation is awaited (comm/communicator.hpp).
void batch(comm::Communicator& comm, std::vector<at::Tensor>& xs, comm::ReduceOp op, int count) {
  std::vector<comm::Op> ops;
  ops.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) ops.push_back(comm.all_reduce(xs[static_cast<std::size_t>(i)], op));
  for (auto& o : ops) complete(std::move(o));
}

net::NcclRow measure(comm::Communicator& comm, comm::ReduceOp op, const std::string& op_name, std::int64_t bytes,
                     int warmup, int iters) {
  const std::int64_t count = std::max<std::int64_t>(1, bytes / 4);
  at::Tensor x = at::empty({count}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  const double n = comm.size();
  x.fill_(comm.rank() + 1);
  complete(comm.all_reduce(x, op));
  const double expected = op == comm::ReduceOp::Sum ? n * (n + 1) / 2 : (n + 1) / 2;
  const std::int64_t wrong = x.ne(expected).sum().item<std::int64_t>();
  std::vector<at::Tensor> xs(static_cast<std::size_t>(std::max(warmup, iters)));
  for (auto& b : xs) b = x.clone();
  batch(comm, xs, op, warmup);
  (void)xs[0][0].item<float>();  // the device is idle before the clock starts
  const auto start = Clock::now();
  batch(comm, xs, op, iters);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / iters;
  auto row = net::nccl_row(net::CollectiveKind::AllReduce, comm.size(), count * 4, count,
                           static_cast<double>(count * 4), seconds);
  row.redop = op_name;
  row.wrong = wrong;
  return row;
}

int skip(const std::string& why, const std::string& json_file) {
  fmt::print("dtsim_nccl_bench: skipped: {}\n", why);
  if (!json_file.empty()) std::ofstream(json_file) << json{{"benchmark", "nccl_all_reduce"}, {"skipped", why}}.dump(2) << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"NCCL all-reduce bus bandwidth through dtsim's NCCL backend, as nccl-tests' all_reduce_perf"};
  std::string min = "8", max = "1G", json_file;
  double factor = 2.0;
  int iters = 20, warmup = 5;
  app.add_option("-b,--minbytes", min, "Smallest size (bytes; K, M, G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", max, "Largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", factor, "Multiply the size by this between rows")->capture_default_str();
  app.add_option("-n,--iters", iters, "Timed all-reduces per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", warmup, "Untimed all-reduces per size first")->capture_default_str();
  app.add_option("--json", json_file, "Also write the rows as JSON to this file");
  std::string op_name = "auto";
  app.add_option("--op", op_name, "Reduction: sum, avg, or auto (avg for one rank, where NCCL's in-place sum is a no-op)")
      ->check(CLI::IsMember({"auto", "sum", "avg"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const std::int64_t lo = net::parse_nccl_size(min), hi = net::parse_nccl_size(max);
    if (!(factor > 1.0) || iters < 1 || warmup < 0 || lo < 1 || hi < lo)
      throw std::invalid_argument("expected 1 <= -b <= -e, -f > 1, -n >= 1, -w >= 0");
    if (!comm::nccl_available()) return skip("this dtsim was built without NCCL/CUDA LibTorch", json_file);
    if (!at::hasCUDA()) return skip("this LibTorch sees no CUDA device", json_file);
    const auto env = job_env();
    auto comm = comm::make_nccl_communicator(env);
    if (op_name == "auto") op_name = comm->size() == 1 ? "avg" : "sum";
    const auto op = op_name == "sum" ? comm::ReduceOp::Sum : comm::ReduceOp::Average;
    net::NcclTable table{
        .source = net::TableSource::Measured,
        .op = net::NcclTestOp::AllReduce,
        .ranks = comm->size(),
        .title = net::nccl_bench_title(net::NcclTestOp::AllReduce, comm->size(),
                                       fmt::format("fp32 {} in place, {} warm-up + {} timed per size", op_name, warmup, iters)),
        .setup = {{"benchmark", "nccl_all_reduce"},
                  {"iters", iters},
                  {"warmup", warmup},
                  {"nccl_version", comm::nccl_library_version()}}};
    const bool prints = comm->rank() == 0;
    // As NCCL_DEBUG=VERSION prints it, which `dtsim collective --against` reads.
    if (prints) fmt::print("# NCCL version {}\n{}", comm::nccl_library_version(), net::nccl_table_header(table));
    for (double bytes = static_cast<double>(lo); bytes <= static_cast<double>(hi); bytes *= factor) {
      table.rows.push_back(measure(*comm, op, op_name, static_cast<std::int64_t>(bytes), warmup, iters));
      if (prints) fmt::print("{}", net::nccl_table_row(table, table.rows.back()));
      std::fflush(stdout);
    }
    if (prints) fmt::print("{}", net::nccl_table_footer(table));
    std::int64_t wrong = 0;
    for (const auto& r : table.rows) wrong += r.wrong.value_or(0);
    if (prints && !json_file.empty()) std::ofstream(json_file) << net::nccl_table_json(table).dump(2) << '\n';
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);  // c10 appends backtraces
    fmt::print(stderr, "dtsim_nccl_bench: {}\n", what);
    return 1;
  }
}
