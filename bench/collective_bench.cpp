// Host cost of one emulated ring all-reduce of real fp32 tensors: the reduction itself
// (n-1 additions of S bytes) plus the engine and network-model bookkeeping.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "comm/emulated.hpp"
#include "network_models/network.hpp"
#include "network_models/topology.hpp"
#include "sim/engine.hpp"

namespace {

using namespace dtsim;

sim::Task<void> reduce_once(comm::Communicator& c, at::Tensor& t) { co_await c.all_reduce(t, comm::ReduceOp::Average); }

void BM_EmulatedAllReduce(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const std::int64_t elements = state.range(1) / 4;
  std::vector<at::Tensor> data;
  for (int r = 0; r < ranks; ++r) data.push_back(at::full({elements}, static_cast<float>(r)));
  net::NetworkConfig config;
  config.nominal = {5e-6, 1.25e10};
  for (auto _ : state) {
    sim::Engine engine;
    auto network = std::make_shared<net::Network>(engine, net::Topology::ring(ranks, config.nominal), config);
    comm::EmulatedWorld world(engine, network, comm::ComputeTiming{});
    for (int r = 0; r < ranks; ++r) engine.spawn(reduce_once(world.communicator(r), data[r]), "rank");
    engine.run();
  }
  state.SetBytesProcessed(state.iterations() * ranks * elements * 4);
}
BENCHMARK(BM_EmulatedAllReduce)->Args({8, 1 << 12})->Args({8, 1 << 22})->Args({64, 1 << 16})->Unit(benchmark::kMicrosecond);

}  // namespace
