// Side by side with SimGrid 3.32: the same platform, the same flows, both simulators.
//
// For each case (a ring or torus of n ranks, a ring all-reduce of S bytes) dtsim runs
// its schedule on the max-min flow model, and SimGrid runs the same point-to-point steps
// (one actor per rank: send the chunk to r+1, wait for it and for the chunk from r-1) on
// a platform built from dtsim's topology: one SimGrid link per dtsim directed link with
// the same latency and bandwidth, and every route given explicitly as dtsim's route, so
// routes are identical. SimGrid's correction factors are off (CM02 with TCP-gamma 0 and
// no cross-traffic), which makes both plain max-min with latency paid up front.
// Each SimGrid case runs in a child process, since SimGrid keeps one engine per process.
//
// Output: one Markdown row per case with both predicted times, their relative
// difference, each simulator's wall-clock time and their ratio.
//   dtsim_simgrid_compare [--quick] [--case TOPOLOGY:RANKS]...
// --case keeps only the named cases (e.g. --case ring:1024 --case torus:32x32:1024): the
// 1,024-rank ones cost minutes of SimGrid time each.
#include <simgrid/s4u.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "network_models/collective_execution.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology_spec.hpp"

namespace sg4 = simgrid::s4u;
using namespace dtsim;

namespace {

constexpr double kLatency = 1e-6;     // 1 us per link
constexpr double kBandwidth = 25e9;   // 25 GB/s per direction

struct Outcome {
  double simulated_s;
  double wall_s;
};

// `evaluate_rings`: as dtsim runs by default, the ring's alone senders computed from its
// recurrence (network_models/ring_wavefront.hpp); else every message simulated.
Outcome run_dtsim(const net::Topology& topology, const net::Schedule& schedule, bool evaluate_rings) {
  const auto start = std::chrono::steady_clock::now();
  const auto finish =
      net::simulate("flow", topology, schedule, std::vector<double>(topology.size(), 0.0), {}, evaluate_rings);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double t = 0.0;
  for (double f : finish) t = std::max(t, f);
  return {t, wall};
}

// The SimGrid side, in this (child) process.
Outcome run_simgrid(const net::Topology& topology, const net::Schedule& schedule) {
  const auto start = std::chrono::steady_clock::now();
  int argc = 1;
  char name[] = "simgrid_compare";
  char* argv[] = {name, nullptr};
  sg4::Engine engine(&argc, argv);
  engine.set_config("network/model:CM02");
  engine.set_config("network/TCP-gamma:0");
  engine.set_config("network/crosstraffic:0");
  auto* zone = sg4::create_full_zone("world");
  const int n = topology.size();
  std::vector<sg4::Host*> hosts;
  for (int r = 0; r < n; ++r) hosts.push_back(zone->create_host(fmt::format("rank{}", r), 1e9)->seal());
  std::vector<sg4::Link*> links;
  for (std::size_t l = 0; l < topology.links().size(); ++l) {
    const auto& link = topology.links()[l];
    links.push_back(zone->create_link(fmt::format("l{}", l), link.params.bandwidth_bytes_per_s)
                        ->set_latency(link.params.latency_s)
                        ->seal());
  }
  for (int r = 0; r < n; ++r) {  // the ring's routes, exactly as dtsim routes them
    const int next = (r + 1) % n;
    if (next == r) continue;
    std::vector<sg4::LinkInRoute> route;
    for (int l : topology.route(r, next)) route.emplace_back(links[l]);
    zone->add_route(hosts[r]->get_netpoint(), hosts[next]->get_netpoint(), nullptr, nullptr, route, false);
  }
  zone->seal();
  std::vector<sg4::SemaphorePtr> received;
  for (int r = 0; r < n; ++r) received.push_back(sg4::Semaphore::create(0));
  for (int r = 0; r < n; ++r)
    sg4::Actor::create(fmt::format("rank{}", r), hosts[r], [&, r] {
      net::Step step_scratch;
      const std::size_t steps = schedule.step_count(r, 0);
      for (std::size_t k = 0; k < steps; ++k) {
        const auto& step = schedule.step(r, 0, k, step_scratch);
        const auto& t = step.sends.front();
        auto comm = sg4::Comm::sendto_async(hosts[r], hosts[t.peer], static_cast<std::uint64_t>(std::llround(t.bytes)));
        comm->wait();
        received[t.peer]->release();
        received[r]->acquire();
      }
    });
  engine.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {sg4::Engine::get_clock(), wall};
}

Outcome run_simgrid_in_child(const net::Topology& topology, const net::Schedule& schedule) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(stdout);  // the child must not inherit (and print again) buffered output
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    Outcome o{-1.0, -1.0};
    try {
      o = run_simgrid(topology, schedule);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "simgrid: %s\n", e.what());
    }
    if (write(fds[1], &o, sizeof o) != static_cast<ssize_t>(sizeof o)) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  Outcome o{-1.0, -1.0};
  if (read(fds[0], &o, sizeof o) != static_cast<ssize_t>(sizeof o)) o = {-1.0, -1.0};
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<std::string> only;  // "topology:ranks"
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
      only.push_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: dtsim_simgrid_compare [--quick] [--case TOPOLOGY:RANKS]...\n");
      return 2;
    }
  }
  struct Case {
    std::string topology;
    int ranks;
  };
  std::vector<Case> cases = quick ? std::vector<Case>{{"ring", 16}, {"torus:4x4", 16}}
                                  : std::vector<Case>{{"ring", 16},        {"ring", 64},        {"ring", 256},
                                                      {"ring", 1024},      {"torus:4x4", 16},   {"torus:8x8", 64},
                                                      {"torus:16x16", 256}, {"torus:32x32", 1024}};
  const std::vector<std::int64_t> sizes = quick ? std::vector<std::int64_t>{8 << 20}
                                                : std::vector<std::int64_t>{8 << 20, 1LL << 30};
  std::printf("# ring all-reduce, links %g us / %g GB/s, max-min flow models (SimGrid CM02, TCP-gamma 0, no cross-traffic)\n\n",
              kLatency * 1e6, kBandwidth / 1e9);
  // Two dtsim walls: every message simulated (the flow model itself), and as dtsim runs
  // by default (rings computed where their senders are alone); their predictions must be
  // equal to the last bit.
  std::printf("| topology | ranks | bytes | dtsim (s) | SimGrid (s) | rel. diff | dtsim wall, messages (s) | speed-up | "
              "dtsim wall, default (s) | speed-up | SimGrid wall (s) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  if (!only.empty())
    std::erase_if(cases, [&](const Case& c) {
      return std::find(only.begin(), only.end(), fmt::format("{}:{}", c.topology, c.ranks)) == only.end();
    });
  for (const auto& c : cases)
    for (auto bytes : sizes) {
      const auto topology = net::make_topology(net::parse_topology(c.topology), c.ranks, {kLatency, kBandwidth});
      const auto schedule = net::make_schedule(
          {.kind = net::CollectiveKind::AllReduce, .algorithm = net::Algorithm::Ring, .ranks = c.ranks, .elements = bytes / 4});
      const auto d = run_dtsim(topology, schedule, false);
      const auto computed = run_dtsim(topology, schedule, true);
      if (computed.simulated_s != d.simulated_s) {
        std::fprintf(stderr, "dtsim: the computed ring (%.17g s) differs from the simulated one (%.17g s)\n",
                     computed.simulated_s, d.simulated_s);
        return 1;
      }
      const auto s = run_simgrid_in_child(topology, schedule);
      std::printf("| %s | %d | %lld | %.9g | %.9g | %.2e | %.3f | %.1fx | %.4f | %.1fx | %.3f |\n", c.topology.c_str(),
                  c.ranks, static_cast<long long>(bytes), d.simulated_s, s.simulated_s,
                  std::fabs(d.simulated_s - s.simulated_s) / s.simulated_s, d.wall_s, s.wall_s / d.wall_s,
                  computed.wall_s, s.wall_s / computed.wall_s, s.wall_s);
      std::fflush(stdout);
    }
  return 0;
}
