// What the nccl model costs against the flow model (issue 46, item 6): the all-reduces of
// `dtsim collective -b 1K -e 1G -f 4` (11 sizes) on the same number of GPUs, timed as that
// command times them (runner::run_collective_sweep): the nccl model on nodes of 8x H100
// (h100_8x; NCCL's choice of algorithm, protocol and channels per size), the flow model on
// a ring of the same ranks with the ring algorithm. Both sweeps run in every iteration (the
// reported time is the nccl sweep's); vs_flow is the flow sweep's time over the nccl sweep's (above 1: the nccl model
// is the cheaper). Items: the nccl model's collectives.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "network_models/nccl/presets.hpp"
#include "network_models/topology_spec.hpp"
#include "runner/collective_table.hpp"

namespace {

using namespace dtsim;

runner::CollectiveSweep sizes_of_the_command(runner::CollectiveSweep s) {
  s.op = net::NcclTestOp::AllReduce;
  s.min_bytes = std::int64_t{1} << 10;
  s.max_bytes = std::int64_t{1} << 30;
  s.factor = 4.0;
  return s;
}

runner::CollectiveSweep nccl_sweep(int ranks) {
  auto config = std::make_shared<net::nccl::Config>();
  config->system = *net::nccl::find_system_preset("h100_8x");
  config->system.nodes = (ranks + config->system.gpus_per_node - 1) / config->system.gpus_per_node;
  runner::CollectiveSweep s;
  s.model = "nccl";
  s.algorithm = net::Algorithm::Auto;
  s.ranks = ranks;
  s.link = net::nccl::nominal_link(config->system);
  s.nccl = config;
  return sizes_of_the_command(s);
}

runner::CollectiveSweep flow_sweep(int ranks) {
  runner::CollectiveSweep s;
  s.model = "flow";
  s.algorithm = net::Algorithm::Ring;
  s.topology = net::parse_topology("ring");
  s.ranks = ranks;
  s.link = {5e-6, 12.5e9};
  return sizes_of_the_command(s);
}

double seconds_of(const runner::CollectiveSweep& s, std::size_t& rows) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = runner::run_collective_sweep(s);
  const auto t1 = std::chrono::steady_clock::now();
  rows = out.size();
  benchmark::DoNotOptimize(out.data());
  return std::chrono::duration<double>(t1 - t0).count();
}

void BM_NcclModelAllReduce(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const auto nccl = nccl_sweep(ranks);
  const auto flow = flow_sweep(ranks);
  double nccl_s = 0.0, flow_s = 0.0;
  std::size_t rows = 0;
  for (auto _ : state) {
    const double t = seconds_of(nccl, rows);
    nccl_s += t;
    flow_s += seconds_of(flow, rows);
    state.SetIterationTime(t);  // the reported time is the nccl sweep's
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(rows));
  if (nccl_s > 0.0) state.counters["vs_flow"] = flow_s / nccl_s;
  state.counters["nccl_s"] = benchmark::Counter(nccl_s, benchmark::Counter::kAvgIterations);
  state.counters["flow_s"] = benchmark::Counter(flow_s, benchmark::Counter::kAvgIterations);
}
// A few iterations: the flow sweep of 1,024 ranks takes about half a second, the nccl one microseconds.
BENCHMARK(BM_NcclModelAllReduce)->Arg(8)->Arg(64)->Arg(1024)->Iterations(5)->Unit(benchmark::kMillisecond)->UseManualTime();

}  // namespace
