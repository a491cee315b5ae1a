// net::PortFlows (network_models/port_flows.hpp): a machine's ports shared by max-min
// fairness over their time, against the fluid model's closed forms.
#include "network_models/port_flows.hpp"
#include "network_models/collective_execution.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

namespace dtsim::net {
namespace {

// Records when each tag ended.
struct Ends : PortFlows::Client {
  explicit Ends(sim::Engine& e) : engine(e) {}
  void transfer_done(std::uint64_t tag) override { at[tag] = engine.now(); }
  sim::Engine& engine;
  std::map<std::uint64_t, double> at;
};

struct Fixture {
  sim::Engine engine;
  PortFlows ports{engine, 8};
  Ends ends{engine};
  void message(double t, double seconds, int egress, int ingress, std::uint64_t tag, double share = 1.0) {
    engine.call_at(t, [=, this] { ports.start(seconds, egress, ingress, ends, tag, share); });
  }
  void everywhere(double t, double seconds, std::uint64_t tag) {
    engine.call_at(t, [=, this] { ports.start_everywhere(seconds, ends, tag); });
  }
};

TEST(PortFlows, AloneATransferTakesExactlyItsTime) {
  Fixture f;
  f.message(0.25, 1.0 / 3.0, 0, 1, 7);
  f.everywhere(5.0, 0.1, 8);
  f.engine.run();
  EXPECT_EQ(f.ends.at.at(7), 0.25 + 1.0 / 3.0);
  EXPECT_EQ(f.ends.at.at(8), 5.0 + 0.1);
  EXPECT_EQ(f.ports.active(), 0u);
}

// Two transfers on one way out (or into one way in) each run at half pace while both
// are on it; the shorter ends at twice its time, the longer takes the whole port after:
// a + b in all (the port never idles). Transfers with no port in common, or on the same
// port in the other direction, do not slow each other.
TEST(PortFlows, TwoOnOnePortEachRunAtHalfPace) {
  Fixture f;
  f.message(0.0, 3.0, 0, 1, 1);
  f.message(0.0, 1.0, 0, 2, 2);  // port 0's way out
  f.message(0.0, 2.0, 3, 4, 3);  // no port in common
  f.message(0.0, 2.0, 4, 0, 4);  // port 0's way in, port 4's way out
  f.engine.run();
  EXPECT_DOUBLE_EQ(f.ends.at.at(2), 2.0);
  EXPECT_DOUBLE_EQ(f.ends.at.at(1), 4.0);
  EXPECT_DOUBLE_EQ(f.ends.at.at(3), 2.0);
  EXPECT_DOUBLE_EQ(f.ends.at.at(4), 2.0);
}

// Max-min: three transfers into port 2 run at 1/3 each; the one that shares port 0's way
// out with them is held to 1/3 there, so the other on port 0 takes the 2/3 left (not 1/2).
TEST(PortFlows, TimeATransferCannotUseGoesToTheOthers) {
  Fixture f;
  f.message(0.0, 1.0, 0, 1, 1);  // x: port 0 out only with y
  f.message(0.0, 1.0, 0, 2, 2);  // y: into port 2
  f.message(0.0, 1.0, 3, 2, 3);  // z: into port 2
  f.message(0.0, 1.0, 4, 2, 4);  // w: into port 2
  f.engine.run();
  EXPECT_DOUBLE_EQ(f.ends.at.at(1), 1.5);  // at 2/3
  for (std::uint64_t t : {2, 3, 4}) EXPECT_DOUBLE_EQ(f.ends.at.at(t), 3.0);  // at 1/3 throughout
  EXPECT_EQ(f.ports.solves(), 3u);  // the start, x's end, the three ends at once
}

// Processor sharing on one port: n transfers started together with works w_1 <= ... <=
// w_n end at sum_{j<k} w_j + (n - k + 1) w_k (each at 1/m while m remain), the last at
// the sum of all: the port never idles.
TEST(PortFlows, OnePortIsProcessorSharing) {
  Fixture f;
  std::vector<double> work;
  for (int k = 0; k < 7; ++k) work.push_back(0.125 * (k * k % 5 + 1) + 0.01 * k);  // distinct, unsorted
  for (std::size_t k = 0; k < work.size(); ++k) f.message(0.0, work[k], 1, static_cast<int>(k % 4 + 2), k);
  f.engine.run();
  std::vector<std::size_t> order(work.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return work[a] < work[b]; });
  const double n = static_cast<double>(work.size());
  double before = 0.0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const double w = work[order[k]];
    EXPECT_NEAR(f.ends.at.at(order[k]), before + (n - static_cast<double>(k)) * w, 1e-12) << "transfer " << order[k];
    before += w;
  }
}

// A transfer joining later slows the one running from then on: the first runs alone for
// t0, then both at half pace.
TEST(PortFlows, ALaterTransferSharesFromItsStart) {
  Fixture f;
  f.message(0.0, 2.0, 5, 6, 1);
  f.message(1.0, 2.0, 7, 6, 2);  // into port 6 too, after 1 s
  f.engine.run();
  EXPECT_DOUBLE_EQ(f.ends.at.at(1), 3.0);  // 1 alone + the remaining 1 at half pace
  EXPECT_DOUBLE_EQ(f.ends.at.at(2), 4.0);  // 1 of its 2 by 3 s at half pace, then alone
}

// A collective holds every port: a message beside it halves its pace while it is on the
// wire, and the collective's too (its busiest port limits it), so each ends later by the
// other's work on the shared port.
TEST(PortFlows, ACollectiveSharesEveryPortWithTheMessages) {
  Fixture f;
  f.everywhere(0.0, 10.0, 1);
  f.message(1.0, 2.0, 2, 3, 2);
  f.engine.run();
  EXPECT_DOUBLE_EQ(f.ends.at.at(2), 5.0);   // 1 + 2 / (1/2)
  EXPECT_DOUBLE_EQ(f.ends.at.at(1), 12.0);  // 10 + the message's 2
}

// A transfer that uses part of its ports at its own pace (a message on a few of NCCL's
// channels) leaves the rest to others: transfers whose shares fit a port run at their own
// paces side by side; beyond, all rise to the pace at which their shares fill the port
// (progressive filling weighted by share), the time one limited elsewhere cannot use going
// to the others.
TEST(PortFlows, TransfersUseTheirShareOfAPort) {
  {
    Fixture f;  // 0.5 + 0.5 of port 0's way out: each at its own pace
    f.message(0.0, 1.0, 0, 1, 1, 0.5);
    f.message(0.0, 2.0, 0, 2, 2, 0.5);
    f.engine.run();
    EXPECT_EQ(f.ends.at.at(1), 1.0);
    EXPECT_EQ(f.ends.at.at(2), 2.0);
  }
  {
    Fixture f;  // 0.75 + 0.75: both at 1 / 1.5 of their pace while both run
    f.message(0.0, 1.0, 0, 1, 1, 0.75);
    f.message(0.0, 2.0, 0, 2, 2, 0.75);
    f.engine.run();
    EXPECT_DOUBLE_EQ(f.ends.at.at(1), 1.5);
    EXPECT_DOUBLE_EQ(f.ends.at.at(2), 1.5 + (2.0 - 1.0));  // 1 s of its 2 done by 1.5, the rest alone
  }
  {
    Fixture f;  // a collective (all of every port) beside a half-port message: both at 2/3
    f.everywhere(0.0, 1.0, 1);
    f.message(0.0, 2.0, 3, 4, 2, 0.5);
    f.engine.run();
    EXPECT_DOUBLE_EQ(f.ends.at.at(1), 1.5);
    EXPECT_DOUBLE_EQ(f.ends.at.at(2), 1.5 + (2.0 - 1.0));
  }
  {
    // Port 0's way out: a (0.6) and b (0.6); b also shares port 5's way in with c (whole).
    // Port 5 limits b and c to 1 / 1.6 of their pace; a takes what b leaves of port 0:
    // (1 - 0.6 / 1.6) / 0.6 = 1.0417 of its pace, so its own pace.
    Fixture f;
    f.message(0.0, 1.0, 0, 1, 1, 0.6);
    f.message(0.0, 1.0, 0, 5, 2, 0.6);
    f.message(0.0, 1.0, 6, 5, 3, 1.0);
    f.engine.run();
    EXPECT_EQ(f.ends.at.at(1), 1.0);
    EXPECT_DOUBLE_EQ(f.ends.at.at(2), 1.6);
    EXPECT_DOUBLE_EQ(f.ends.at.at(3), 1.6);
  }
  sim::Engine engine;
  PortFlows ports(engine, 2);
  Ends ends(engine);
  EXPECT_THROW(ports.start(1.0, 0, 1, ends, 1, 0.0), std::invalid_argument);
  EXPECT_THROW(ports.start(1.0, 0, 1, ends, 1, 1.5), std::invalid_argument);
}

// Transfers started at one instant are solved once, after every event due then.
TEST(PortFlows, OneSolvePerInstant) {
  Fixture f;
  for (int p = 0; p < 8; ++p) f.message(0.0, 1.0, p, (p + 1) % 8, static_cast<std::uint64_t>(p));
  for (int p = 0; p < 8; ++p) f.message(0.0, 1.0, p, (p + 7) % 8, static_cast<std::uint64_t>(8 + p));
  f.engine.run();
  for (std::uint64_t t = 0; t < 16; ++t) EXPECT_DOUBLE_EQ(f.ends.at.at(t), 2.0) << t;
  EXPECT_EQ(f.ports.solves(), 2u);  // the starts, the ends
}

// Two communicators' streams on one machine (two process groups): their collectives run
// at once, each on every port, so each at half pace while both run; within one stream
// they still run one after the other.
TEST(PortFlows, CollectivesOfTwoStreamsShareTheMachine) {
  sim::Engine engine;
  auto ports = std::make_shared<PortFlows>(engine, 4);
  CollectiveStream first(engine, ports), second(engine, ports);
  std::vector<double> a(2, -1.0), b(2, -1.0), c(2, -1.0);
  engine.call_at(0.0, [&] {
    first.submit({1.0, 1.0}, 2, [&](int r) { a[static_cast<std::size_t>(r)] = engine.now(); });
    second.submit({3.0, 3.0}, 2, [&](int r) { b[static_cast<std::size_t>(r)] = engine.now(); });
    first.submit({1.0, 1.0}, 2, [&](int r) { c[static_cast<std::size_t>(r)] = engine.now(); });  // behind the first
  });
  engine.run();
  for (int r = 0; r < 2; ++r) {
    EXPECT_DOUBLE_EQ(a[static_cast<std::size_t>(r)], 2.0);  // at half pace beside the second stream's
    EXPECT_DOUBLE_EQ(c[static_cast<std::size_t>(r)], 4.0);  // then the next of its stream, also at half
    EXPECT_DOUBLE_EQ(b[static_cast<std::size_t>(r)], 5.0);  // 2 of its 3 done by 4, the last alone
  }
}

// A collective's latencies hold no port: only its data shares the ports. A collective of
// 1 s of which 0.2 s is data, beside a message of 1 s on the wire: both at half pace until
// the collective's data is done (0.4 s), its 0.8 s of latency after, alone (1.2 s); the
// message, 0.2 s of its wire done by then, alone after (1.2 s). Had the whole second held
// the ports, both would end at 2 s. The next collective of the stream starts when the
// first ends, latencies included; one with no data holds no port.
TEST(PortFlows, OnlyACollectivesDataSharesThePorts) {
  sim::Engine engine;
  auto ports = std::make_shared<PortFlows>(engine, 4);
  CollectiveStream stream(engine, ports);
  Ends ends(engine);
  std::vector<double> first(2, -1.0), second(2, -1.0), latency_only(2, -1.0);
  engine.call_at(0.0, [&] {
    stream.submit({1.0, 0.2}, 2, [&](int r) { first[static_cast<std::size_t>(r)] = engine.now(); });
    stream.submit({0.5, 0.5}, 2, [&](int r) { second[static_cast<std::size_t>(r)] = engine.now(); });
    stream.submit({0.25, 0.0}, 2, [&](int r) { latency_only[static_cast<std::size_t>(r)] = engine.now(); });
    ports->start(1.0, 0, 1, ends, 1);
  });
  engine.run();
  for (int r = 0; r < 2; ++r) {
    EXPECT_DOUBLE_EQ(first[static_cast<std::size_t>(r)], 1.2);
    EXPECT_DOUBLE_EQ(second[static_cast<std::size_t>(r)], 1.7);  // alone: the message ended at 1.2
    EXPECT_DOUBLE_EQ(latency_only[static_cast<std::size_t>(r)], 1.95);
  }
  EXPECT_DOUBLE_EQ(ends.at.at(1), 1.2);
}

// Alone, a collective ends exactly its time after it starts, its data and latencies apart:
// in plain doubles, and on a time grid (where the engine rounds every duration to ticks).
TEST(PortFlows, AloneACollectiveTakesExactlyItsTime) {
  for (const auto& grid : {sim::TimeGrid(), sim::TimeGrid::from_resolution(1e-14), sim::TimeGrid::from_resolution(1e-9)}) {
    sim::Engine engine(grid);
    auto ports = std::make_shared<PortFlows>(engine, 4);
    CollectiveStream stream(engine, ports);
    double end = -1.0, second = -1.0;
    engine.call_at(0.25, [&] {
      stream.submit({1.0 / 3.0, 0.1}, 1, [&](int) { end = engine.now(); });
      stream.submit({1.0 / 7.0, 1.0 / 11.0}, 1, [&](int) { second = engine.now(); });  // behind it
    });
    engine.run();
    EXPECT_EQ(end, grid.later(0.25, 1.0 / 3.0)) << grid.tick();
    EXPECT_EQ(second, grid.later(end, 1.0 / 7.0)) << grid.tick();
  }
}

TEST(PortFlows, RefusesPortsItDoesNotHave) {
  sim::Engine engine;
  PortFlows ports(engine, 2);
  Ends ends(engine);
  EXPECT_THROW(ports.start(1.0, 0, 2, ends, 0), std::out_of_range);
  EXPECT_THROW(ports.start(1.0, -1, 0, ends, 0), std::out_of_range);
  EXPECT_THROW(PortFlows(engine, 0), std::invalid_argument);
}

}  // namespace
}  // namespace dtsim::net
