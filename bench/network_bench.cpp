// Flow-model simulation speed: one ring all-reduce of 64 MB on a square torus, simulated
// with max-min flows. Items are point-to-point messages simulated per second; the
// 64x64 case (4096 ranks, 33.5 M messages) is the scale target (under 10 s here).
#include <benchmark/benchmark.h>

#include "network_models/collective_execution.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology_spec.hpp"

namespace {

using namespace dtsim;

void BM_FlowRingAllReduceOnTorus(benchmark::State& state) {
  const int side = static_cast<int>(state.range(0)), n = side * side;
  const auto topology = net::Topology::torus({side, side}, {5e-6, 12.5e9});
  const auto schedule = net::make_schedule(
      {.kind = net::CollectiveKind::AllReduce, .algorithm = net::Algorithm::Ring, .ranks = n, .elements = 16 << 20});
  double simulated = 0.0;
  for (auto _ : state) {
    const auto finish = net::simulate("flow", topology, schedule, std::vector<double>(n, 0.0));
    simulated = finish.front();
  }
  state.counters["simulated_s"] = simulated;
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(schedule.messages()));
}
BENCHMARK(BM_FlowRingAllReduceOnTorus)->Arg(8)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FlowRingAllReduceOnTorus)->Arg(64)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
