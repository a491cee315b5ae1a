// Resource limits up front: what a scenario will need, from the parsed Scenario alone (no
// tensor, topology, schedule or dataset is built), so that a run that cannot fit in memory
// is refused before anything large is allocated, and one that would take hours says so.
//
// Memory (estimate_resources; bytes as doubles, so that products of int64 fields such as
// samples x features or ranks x ranks never overflow or wrap: a double reaches 1e308):
//
//   tensors   ranks holding real tensors (all ranks emulated; 1 in timing-only mode and in
//             a live process) x one rank's: the model M (fp32 parameters) times
//               2 (parameters, gradients) + 1 (momentum, when momentum > 0)
//               + 3 (the closing reductions: the flat model, the rank-mean model and the
//                 evaluation's flat model, alive with everything else on every rank)
//               + the algorithm's model-sized buffers (algorithms::memory_footprint: flat
//                 copies, replicas, memories, per-neighbour replicas x gossip degree)
//             plus its messages in payloads (payload_fraction x M): gossip keeps one per
//             neighbour, its own and the copy in flight; an all-gather's output one block
//             per rank (the emulated world clones them; the timing-only representative
//             shares one); plus the workload's per-rank buffers (logistic regression: the
//             shard's indices and the batch, batch x features floats, the whole shard with
//             "full"; Fashion-MNIST models: the batch's activations);
//             plus, shared by the world, one all-reduce result (M) and one gathered set.
//   data      once per process (run.cpp loads it once and every rank shares it): logistic
//             regression samples x features fp32 plus a few floats per sample; Fashion-MNIST
//             the (train_samples or 60,000) + (test_samples or 10,000) fp32 images and the
//             evaluation's 2,000-image chunk of activations; shape-only models the 16 MB
//             value pool.
//   topology  each copy of net::Topology (one emulated or live, two in timing-only mode,
//             whose replay copies it): links (24 B per direction of each cable), adjacency
//             lists, the gossip graph (when computed: gossip algorithms, timing-only mode;
//             4 B per neighbour per rank, ranks - 1 on star, complete, fat-tree and
//             hierarchical topologies), up to 256 cached BFS trees (4 B per node each);
//             and building it (the builder's edge list and de-duplicating set).
//   routes    the route cache (one route per communicating (src, dst) pair: the ring's n
//             pairs, halving-doubling's n log n, the direct algorithm's n^2, each about
//             80 B + 4 B per hop), each collective's schedule (16 B per transfer; a ring's
//             is compact) and the messages in flight (about 128 B each).
//   records   per-step records: about 320 B per rank per step (rank_program's series, its
//             per-step phase list, the closing all-reduce's record and each rank's
//             RunResult); timing-only mode: the representative's trace (about 32 B per
//             operation) and 160 B per rank per step of replay records; the result JSON.
//   ranks     bookkeeping per simulated rank (coroutine frames, communicator, workload and
//             algorithm objects): 16 KB; 4 KB per replaying rank in timing-only mode.
//
// Checked in tests/resource_limits_test.cpp: the estimate over the peak RSS of dtsim runs
// (each minus a one-rank run's) is 0.71 to 1.28 on the seven scenarios measured there
// (asserted within [0.5, 1.5]).
//
// Work (the note for long runs): simulated events, i.e. every point-to-point message of
// every collective's schedule (ring all-reduce 2 n (n - 1) per call, all-gather n (n - 1),
// halving-doubling 2 n log2 n, tree 4 (n - 1), direct 2 n (n - 1), parameter server
// 2 (n - 1); the analytical model one completion per rank), every gossip message (n x
// degree), and about 12 compute and phase events per rank per step, over the steps plus
// the closing reductions and evaluations; the flow model counts twice (rate
// recomputations). Bookkeeping steps, about ten times cheaper: a BFS over every node and
// link per gossip-graph row (twice per rank) and per routed source, a mixing row per rank,
// and the analytical model's schedules (built and walked per call as the others'). On 2
// cores about 4e6 events run a second: the note comes above 1e9 (minutes; hours above
// 1e10). A ring of 65,536 ranks in timing-only mode spends 11 minutes (2.6e10 BFS visits)
// computing its gossip graph, and says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "network_models/topology_spec.hpp"
#include "runner/scenario.hpp"

namespace dtsim::runner {

enum class RunKind { Emulated, Live };  // Emulated honours Scenario::timing_only

struct ResourceEstimate {
  double model_elements = 0.0;   // parameters per rank
  double tensor_ranks = 0.0;     // ranks whose tensors this process holds
  double rank_tensor_bytes = 0.0;  // one such rank's tensors (see above)
  double peer_message_bytes = 0.0;  // ... of which its gossip neighbours' messages and replicas
  double gathered_bytes = 0.0;      // ... of which its all-gather output
  double workload_rank_bytes = 0.0;  // ... of which the workload's per-rank buffers
  double tensor_bytes = 0.0;     // tensor_ranks x rank_tensor_bytes + the world's shared results
  double data_bytes = 0.0;
  double topology_bytes = 0.0;
  double route_bytes = 0.0;
  double record_bytes = 0.0;
  double rank_bookkeeping_bytes = 0.0;
  double total_bytes() const;

  double network_events = 0.0;     // simulated events (messages, completions, compute steps)
  // Cheaper steps (about ten to an event): BFS visits building the gossip graph and the
  // routes, mixing-matrix rows, and the analytical model's schedule walks.
  double bookkeeping_steps = 0.0;
};

ResourceEstimate estimate_resources(const Scenario& s, RunKind kind = RunKind::Emulated);

// The topology alone, one copy with what building it takes (the parse-time check).
double topology_build_bytes(const net::TopologySpec& spec, int ranks);

// The memory this process may still use: DTSIM_MEMORY_LIMIT when set (bytes, with an
// optional K, M, G or T suffix in powers of 1024, e.g. "8G"; "unlimited" turns the check
// off), else the smaller of /proc/meminfo's MemAvailable and what the cgroup's
// memory.max leaves. nullopt: no limit known (or "unlimited").
struct MemoryLimit {
  double bytes = 0.0;
  std::string source;  // "DTSIM_MEMORY_LIMIT", "MemAvailable", "the cgroup's memory.max"
};
std::optional<MemoryLimit> memory_limit();
// Parses a DTSIM_MEMORY_LIMIT value; throws std::invalid_argument naming the variable.
double parse_memory_size(const std::string& text);

// Throws ScenarioError (one line: the JSON path, the estimate, the limit and the way out)
// when the estimate exceeds memory_limit(). run_emulated and run_live call it first.
void check_resources(const Scenario& s, RunKind kind = RunKind::Emulated);
// The same for the topology alone; parse_scenario calls it before building the topology.
void check_topology_fits(const Scenario& s);

// One line for a run of more than 1e9 simulated events (bookkeeping steps counting a tenth
// each): "note: about 3.2e10 simulated network events; this run may take hours; ...";
// nullopt otherwise. Emulated runs only.
std::optional<std::string> long_run_note(const Scenario& s);

// "1.6 TiB", "24 GiB", "512 MiB", "3 KiB", "12 B".
std::string format_bytes(double bytes);

}  // namespace dtsim::runner
