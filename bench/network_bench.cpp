// Flow-model simulation speed: one ring all-reduce of 64 MB on a square torus. Items are
// point-to-point messages per second. BM_FlowRingAllReduceOnTorus simulates every message
// with max-min flows (the engine and the flow model; the 64x64 case, 4,096 ranks and
// 33.5 M messages, is the scale target); BM_FlowRingAllReduceOnTorusComputed is what runs
// by default, the ring's alone senders computed from its recurrence and only the two
// coupled senders' messages simulated (network_models/ring_wavefront.hpp), the same times.
#include <benchmark/benchmark.h>

#include "network_models/collective_execution.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology_spec.hpp"

namespace {

using namespace dtsim;

void flow_ring_all_reduce_on_torus(benchmark::State& state, bool evaluate_rings) {
  const int side = static_cast<int>(state.range(0)), n = side * side;
  const auto topology = net::Topology::torus({side, side}, {5e-6, 12.5e9});
  const auto schedule = net::make_schedule(
      {.kind = net::CollectiveKind::AllReduce, .algorithm = net::Algorithm::Ring, .ranks = n, .elements = 16 << 20});
  double simulated = 0.0;
  for (auto _ : state) {
    const auto finish = net::simulate("flow", topology, schedule, std::vector<double>(n, 0.0), {}, evaluate_rings);
    simulated = finish.front();
  }
  state.counters["simulated_s"] = simulated;
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(schedule.messages()));
}

void BM_FlowRingAllReduceOnTorus(benchmark::State& state) { flow_ring_all_reduce_on_torus(state, false); }
BENCHMARK(BM_FlowRingAllReduceOnTorus)->Arg(8)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FlowRingAllReduceOnTorus)->Arg(64)->Iterations(1)->Unit(benchmark::kSecond);

void BM_FlowRingAllReduceOnTorusComputed(benchmark::State& state) { flow_ring_all_reduce_on_torus(state, true); }
BENCHMARK(BM_FlowRingAllReduceOnTorusComputed)->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond);

}  // namespace
