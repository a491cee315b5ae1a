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

namespace {

using namespace dtsim;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// "8", "4K", "16M", "1G": powers of 1024, as nccl-tests reads sizes.
std::int64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  const long long n = std::stoll(text, &used);
  const std::string unit = text.substr(used);
  const std::int64_t scale = unit.empty() ? 1 : unit == "K" ? 1 << 10 : unit == "M" ? 1 << 20 : unit == "G" ? 1 << 30 : 0;
  if (scale == 0 || n < 0) throw std::invalid_argument("expected a size such as 8, 4K, 16M or 1G, got " + text);
  return n * scale;
}

comm::LiveEnv job_env() {
  const bool launched = std::getenv("RANK") || std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK") ||
                        std::getenv("SLURM_PROCID");
  if (launched) return comm::LiveEnv::from_environment();
  comm::LiveEnv env;  // rank 0 of 1, LOCAL_RANK 0
  env.master_port = comm::free_loopback_port();
  env.timeout = std::chrono::milliseconds(30000);
  return env;
}

struct Row {
  std::int64_t bytes, count;
  double time_us, algbw, busbw;
  std::int64_t wrong;
};

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

Row measure(comm::Communicator& comm, comm::ReduceOp op, std::int64_t bytes, int warmup, int iters) {
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
  const double algbw = static_cast<double>(count * 4) / seconds / 1e9;
  return {count * 4, count, seconds * 1e6, algbw, algbw * 2.0 * (n - 1.0) / n, wrong};
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
    const std::int64_t lo = parse_size(min), hi = parse_size(max);
    if (!(factor > 1.0) || iters < 1 || warmup < 0 || lo < 1 || hi < lo)
      throw std::invalid_argument("expected 1 <= -b <= -e, -f > 1, -n >= 1, -w >= 0");
    if (!comm::nccl_available()) return skip("this dtsim was built without NCCL/CUDA LibTorch", json_file);
    if (!at::hasCUDA()) return skip("this LibTorch sees no CUDA device", json_file);
    const auto env = job_env();
    auto comm = comm::make_nccl_communicator(env);
    if (op_name == "auto") op_name = comm->size() == 1 ? "avg" : "sum";
    const auto op = op_name == "sum" ? comm::ReduceOp::Sum : comm::ReduceOp::Average;
    std::vector<Row> rows;
    if (comm->rank() == 0) {
      fmt::print("# dtsim_nccl_bench: all_reduce, {} rank(s), fp32 {} in place, {} warm-up + {} timed per size\n",
                 comm->size(), op_name, warmup, iters);
      fmt::print("#{:>11} {:>13} {:>7} {:>6} {:>6} {:>10} {:>8} {:>8} {:>7}\n", "size", "count", "type", "redop",
                 "root", "time", "algbw", "busbw", "#wrong");
      fmt::print("#{:>11} {:>13} {:>7} {:>6} {:>6} {:>10} {:>8} {:>8} {:>7}\n", "(B)", "(elements)", "", "", "", "(us)",
                 "(GB/s)", "(GB/s)", "");
    }
    for (double bytes = static_cast<double>(lo); bytes <= static_cast<double>(hi); bytes *= factor) {
      rows.push_back(measure(*comm, op, static_cast<std::int64_t>(bytes), warmup, iters));
      const Row& r = rows.back();
      if (comm->rank() == 0)
        fmt::print("{:>12} {:>13} {:>7} {:>6} {:>6} {:>10.2f} {:>8.2f} {:>8.2f} {:>7}\n", r.bytes, r.count, "float",
                   op_name, -1, r.time_us, r.algbw, r.busbw, r.wrong);
      std::fflush(stdout);
    }
    std::int64_t wrong = 0;
    for (const auto& r : rows) wrong += r.wrong;
    if (comm->rank() == 0 && !json_file.empty()) {
      json out = {{"benchmark", "nccl_all_reduce"}, {"ranks", comm->size()}, {"iters", iters}, {"warmup", warmup},
                  {"rows", json::array()}};
      for (const auto& r : rows)
        out["rows"].push_back({{"bytes", r.bytes}, {"count", r.count}, {"type", "float"}, {"redop", op_name},
                               {"time_us", r.time_us}, {"algbw_GBps", r.algbw}, {"busbw_GBps", r.busbw},
                               {"wrong", r.wrong}});
      std::ofstream(json_file) << out.dump(2) << '\n';
    }
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);  // c10 appends backtraces
    fmt::print(stderr, "dtsim_nccl_bench: {}\n", what);
    return 1;
  }
}
