// net::Schedule: a collective decomposed into point-to-point transfers.
//
// Each rank runs one or more lanes (independent sequences of steps; lanes of one rank
// run concurrently, as the two trees of a double binary tree do). A step sends its
// transfers and waits for its receives; the next step of the lane starts when all of
// them are done (a send is done when its data has arrived). The k-th message from p to
// r in a lane matches r's k-th receive from p in the same lane.
//
// Sizes are exact: a buffer of `elements` elements is cut into chunks of whole elements
// (the first elements % parts chunks one element longer), so bytes_sent() is the exact
// wire traffic, identical in every backend. With equal chunks the timings equal the
// closed forms in closed_form.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::net {

struct Transfer {
  int peer;
  double bytes;
};

struct Step {
  std::vector<Transfer> sends;
  std::vector<int> receives;  // peers, one entry per message expected
};

using Lane = std::vector<Step>;

enum class CollectiveKind { AllReduce, ReduceScatter, AllGather, Broadcast };
enum class Algorithm { Auto, Ring, HalvingDoubling, DoubleBinaryTree, Direct, ParameterServer, Binomial };

struct CollectiveSpec;
struct Schedule;

// What one call of an implementation moves over `ranks` ranks, without building its
// schedule: for the up-front resource estimate (runner/resource_estimate.hpp), which
// sizes routes, flights and events from it. Exact where it says so, else an upper bound
// (tests/network_model_test.cpp holds each to the schedule it counts).
struct ScheduleCounts {
  double messages = 0;            // point-to-point messages (exact)
  double pairs = 0;               // distinct (src, dst) pairs, at most
  double in_flight = 0;           // messages in flight at once, at most
  double schedule_transfers = 0;  // entries of the explicit schedule (exact; 0: the compact ring form)
  bool neighbour_pairs = false;   // every message goes from rank r to r + 1 (mod ranks)
};

// One collective algorithm, an entry of collective_algorithms(): the only place its
// name is spelled. Adding an algorithm: an Algorithm value, its schedule function(s) and
// their counts in schedule.cpp (or a file of their own), one entry in the table there,
// and its closed form in closed_form.cpp (what the analytical model and `auto` use).
struct CollectiveAlgorithm {
  struct Implementation {
    CollectiveKind kind;
    Schedule (*schedule)(const CollectiveSpec& spec);
    ScheduleCounts (*counts)(int ranks);
  };
  Algorithm id;
  const char* name;         // as scenarios and `--algo` spell it
  const char* description;  // one line
  std::vector<Implementation> implementations;  // the collectives it implements (none for Auto)
  // Whether `auto` may pick it (fastest_algorithm.hpp): single-port algorithms only,
  // since a multi-port one's closed form does not see its NIC contention, and each
  // candidate costs `auto` a simulation.
  bool auto_candidate;
};

// Every algorithm, Auto first, in the order help texts and error messages list them.
const std::vector<CollectiveAlgorithm>& collective_algorithms();
const CollectiveAlgorithm& collective_algorithm(Algorithm a);

const char* to_string(CollectiveKind k);
const char* to_string(Algorithm a);
// Parses an algorithm's name ("ring", "halving_doubling", "tree", ..., "auto");
// throws std::invalid_argument listing the names.
Algorithm parse_algorithm(const std::string& name);
// The counts of `a`'s implementation of `kind` over `ranks` ranks (zero below two ranks);
// throws std::invalid_argument where `a` does not implement `kind` (Auto included).
ScheduleCounts schedule_counts(Algorithm a, CollectiveKind kind, int ranks);
// The algorithms that implement `kind`, in table order.
std::vector<Algorithm> algorithms_for(CollectiveKind kind);
// Those of them that `auto` chooses among (their `auto_candidate`), in table order.
std::vector<Algorithm> auto_candidates(CollectiveKind kind);
// The names joined by `separator` and, before the last one, `last_separator`
// ("auto, ring or binomial"), for help texts.
std::string algorithm_names(const char* separator = ", ", const char* last_separator = ", ");

struct Schedule {
  std::string name;
  // Explicit form: lanes[rank][lane] lists the steps.
  std::vector<std::vector<Lane>> lanes;
  // Compact form for rings (lanes empty), so that a ring over thousands of ranks costs
  // O(n) memory instead of O(n^2): one lane per rank; in step k rank r sends
  // chunk[(r - k) mod n] to r + 1 and receives from r - 1, and from step `shift_from` on
  // it sends chunk[(r + 1 - (k - shift_from)) mod n] (the all-gather half of an
  // all-reduce, forwarding the chunk it reduced last).
  struct Ring {
    int ranks = 0;
    int steps = 0;
    int shift_from = 0;
    std::vector<double> chunk;
  };
  Ring ring;

  int size() const { return lanes.empty() ? ring.ranks : static_cast<int>(lanes.size()); }
  int lane_count(int rank) const;
  std::size_t step_count(int rank, int lane) const;
  // Step k of a lane: a reference into `lanes`, or `scratch` filled for a ring.
  const Step& step(int rank, int lane, std::size_t k, Step& scratch) const;
  // The compact ring form's step k of `rank` without a Step: its one send, and the
  // rank its one receive comes from.
  bool compact_ring() const { return lanes.empty(); }
  Transfer ring_send(int rank, std::size_t k) const;
  // The index into ring.chunk of what `rank` sends in step k (inline: once per message).
  // rank - k and rank + 1 - (k - shift_from) lie in (-n, n] in the schedules built here,
  // so one addition or subtraction wraps them; the loops serve hand-made Rings.
  int ring_chunk(int rank, std::size_t k) const {
    const int n = ring.ranks, kk = static_cast<int>(k);
    int index = kk < ring.shift_from ? rank - kk : rank + 1 - (kk - ring.shift_from);
    while (index < 0) index += n;
    while (index >= n) index -= n;
    return index;
  }
  int ring_receive_from(int rank) const { return rank == 0 ? ring.ranks - 1 : rank - 1; }

  double bytes_sent(int rank) const;
  double bytes_received(int rank) const;  // from the peers' sends
  std::size_t messages() const;
};

// A collective over `ranks` ranks of a buffer of `elements` elements of `element_size`
// bytes. For all-gather, `block_elements[r]` is rank r's contribution (variable sizes)
// and `elements` is ignored; for broadcast, `root` is the source.
struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Algorithm algorithm = Algorithm::Auto;  // resolve with resolve_collective() before make_schedule()
  int ranks = 1;
  std::int64_t elements = 0;
  std::int64_t element_size = 4;
  std::vector<std::int64_t> block_elements;
  int root = 0;
};

// Builds the schedule; throws std::invalid_argument if the algorithm does not
// implement the collective (Auto must be resolved first, see closed_form.hpp).
Schedule make_schedule(const CollectiveSpec& spec);

// Neighbour exchange: every rank sends `bytes` to each of its peers and receives from
// each of them, in one step.
Schedule exchange_schedule(const std::vector<std::vector<int>>& peers, const std::vector<double>& bytes);

// Bytes of chunk `i` when `elements` elements of `element_size` are cut into `parts`.
double chunk_bytes(std::int64_t elements, std::int64_t element_size, int parts, int i);

}  // namespace dtsim::net
