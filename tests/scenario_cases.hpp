// Scenarios shared by the tests of trace replay (the timing-only mode and record-and-
// replay): small runs of every communication pattern — all-reduce, all-gather, gossip
// exchange, stream collectives, staged backward, flow contention, a straggler.
#pragma once

#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/run.hpp"

namespace dtsim::testing {

using nlohmann::json;

inline json logistic() {
  return {{"kind", "logistic_regression"}, {"samples", 512}, {"features", 8}, {"batch_size", 16}};
}
inline json resnet20() { return {{"type", "resnet20"}, {"batch_size", 8}}; }

inline json scenario(int ranks, json workload, json algorithm, json topology, json network = {}) {
  if (network.is_null()) network = {{"model", "alpha_beta"}, {"latency_us", 3}, {"bandwidth_GBps", 2}};
  return {{"name", "timing"}, {"ranks", ranks},     {"steps", 12},          {"seed", 5},
          {"eval_every", 5},  {"workload", workload}, {"algorithm", algorithm}, {"topology", topology},
          {"network", network}, {"compute", {{"gflops", 500}, {"memory_GBps", 50}}}};
}

struct Case {
  const char* name;
  json doc;
};

// Every rank does the same work with the same payload sizes: one rank can stand for all.
inline std::vector<Case> symmetric_cases() {
  const json sgd = {{"lr", 0.1}, {"momentum", 0.9}};
  auto with = [&](json algorithm) {
    json a = sgd;
    a.update(algorithm);
    return a;
  };
  json straggling = scenario(6, logistic(), with({{"name", "parallel_sgd"}, {"variant", "decentralized"}}),
                             {{"kind", "ring"}});
  straggling["compute"]["stragglers"] = json::array({{{"rank", 2}, {"slowdown", 3.5}}});
  return {
      {"dpsgd_ring_with_straggler", straggling},
      {"centralized_star_flow",
       scenario(5, logistic(), with({{"name", "parallel_sgd"}, {"variant", "centralized"}}), {{"kind", "star"}},
                {{"model", "flow"}, {"latency_us", 2}, {"bandwidth_GBps", 1}})},
      {"choco_topk_torus",
       scenario(9, resnet20(),
                with({{"name", "choco_sgd"}, {"compressor", {{"kind", "top_k"}, {"ratio", 0.01}}},
                      {"consensus_stepsize", 0.3}}),
                {{"kind", "torus"}, {"dims", {3, 3}}})},
      {"choco_sign_no_overlap_ring",
       scenario(4, logistic(),
                with({{"name", "choco_sgd"}, {"compressor", {{"kind", "scaled_sign"}}}, {"overlap", false}}),
                {{"kind", "ring"}})},
      {"dcd_qsgd_hypercube",
       scenario(8, logistic(), with({{"name", "dcd_psgd"}, {"compressor", {{"kind", "qsgd"}, {"levels", 16}}}}),
                {{"kind", "hypercube"}})},
      {"sparsified_allgather_ring",
       scenario(4, resnet20(), with({{"name", "sparsified_sgd"}, {"compressor", {{"kind", "top_k"}, {"ratio", 0.05}}}}),
                {{"kind", "ring"}})},
      {"sign_sgd_majority", scenario(6, logistic(), with({{"name", "sign_sgd"}}), {{"kind", "ring"}})},
      {"local_sgd_h4_fat_tree",
       scenario(8, logistic(), with({{"name", "local_sgd"}, {"local_steps", 4}}), {{"kind", "fat_tree"}, {"k", 4}},
                {{"model", "flow"}, {"latency_us", 1}, {"bandwidth_GBps", 10}})},
      {"distopt_sync_stream",
       scenario(4, resnet20(), with({{"name", "distopt"}, {"variant", "sync"}, {"threshold", 20000}, {"buffer_size", 40000}}),
                {{"kind", "ring"}})},
      {"distopt_partial",
       scenario(4, resnet20(),
                with({{"name", "distopt"}, {"variant", "partial"}, {"threshold", 20000}, {"buffer_size", 40000}}),
                {{"kind", "ring"}})},
      {"distopt_sparse_topk_allgather",
       scenario(4, resnet20(),
                with({{"name", "distopt"}, {"variant", "sparse"}, {"top_k", true}, {"spars", 0.02}, {"threshold", 20000},
                      {"buffer_size", 40000}}),
                {{"kind", "ring"}})},
  };
}

// Every timing figure of `replayed` equals `run`'s, bit for bit: per-step times, compute,
// traffic, phases and evaluation times.
inline void expect_same_timing(const runner::RunResult& replayed, const runner::RunResult& run) {
  EXPECT_EQ(replayed.step_time_s, run.step_time_s);
  EXPECT_EQ(replayed.compute_time_s, run.compute_time_s);
  EXPECT_EQ(replayed.wire_bytes, run.wire_bytes);
  EXPECT_EQ(replayed.calls, run.calls);
  EXPECT_EQ(replayed.phase_names, run.phase_names);
  EXPECT_EQ(replayed.phase_mean_s, run.phase_mean_s);
  ASSERT_EQ(replayed.eval.size(), run.eval.size());
  for (std::size_t i = 0; i < run.eval.size(); ++i) {
    EXPECT_EQ(replayed.eval[i].step, run.eval[i].step);
    EXPECT_EQ(replayed.eval[i].time_s, run.eval[i].time_s) << "evaluation " << i;
  }
}

}  // namespace dtsim::testing
