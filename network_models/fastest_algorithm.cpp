#include "network_models/fastest_algorithm.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "network_models/closed_form.hpp"
#include "network_models/collective_execution.hpp"

namespace dtsim::net {

namespace {

double last(const std::vector<double>& done) { return done.empty() ? 0.0 : *std::max_element(done.begin(), done.end()); }

// Whether `bound`, a lower bound (in exact arithmetic) on the time of a schedule of
// `messages` messages, shows it slower than `best`, a simulated time, whatever the
// rounding of either: by more than 1e-6 of it (the flow model's rate arithmetic,
// relative errors of 1e-16 over up to 10^10 events) plus half a tick of the time grid
// per duration added on any path (a message adds two: its latency and its transfer).
bool slower_whatever_the_rounding(double bound, double best, std::size_t messages, const sim::TimeGrid& grid) {
  return bound > best * (1.0 + 1e-6) + static_cast<double>(messages) * grid.tick();
}

}  // namespace

double seconds_alone(const NetworkModel& model, const Topology& topology, const LinkParams& nominal,
                     const CollectiveSpec& spec, const Schedule& schedule, sim::TimeGrid grid) {
  if (model.closed_form_collectives) return closed_form_seconds(spec, nominal.latency_s, nominal.bandwidth_bytes_per_s);
  return last(simulate(model, topology, schedule, std::vector<double>(static_cast<std::size_t>(spec.ranks), 0.0), {},
                       true, grid));
}

double busiest_link_seconds(const Topology& topology, const Schedule& schedule) {
  std::vector<double> bytes(topology.links().size(), 0.0);
  Step scratch;
  for (int r = 0; r < schedule.size(); ++r)
    for (int lane = 0; lane < schedule.lane_count(r); ++lane)
      for (std::size_t k = 0; k < schedule.step_count(r, lane); ++k)
        for (const Transfer& t : schedule.step(r, lane, k, scratch).sends)
          for (int link : topology.route(r, t.peer)) bytes[static_cast<std::size_t>(link)] += t.bytes;
  double busiest = 0.0;
  for (std::size_t l = 0; l < bytes.size(); ++l)
    busiest = std::max(busiest, bytes[l] / topology.links()[l].params.bandwidth_bytes_per_s);
  return busiest;
}

FastestAlgorithm::FastestAlgorithm(const NetworkModel& model, const Topology& topology, LinkParams nominal,
                                   sim::TimeGrid grid)
    : model_(model), topology_(topology), routes_(topology), nominal_(nominal), grid_(grid) {}

AlgorithmChoice FastestAlgorithm::choose(const CollectiveSpec& spec) {
  const double alpha = nominal_.latency_s, beta = nominal_.bandwidth_bytes_per_s;
  if (model_.closed_form_collectives) {
    CollectiveSpec cheapest = spec;
    cheapest.algorithm = cheapest_algorithm(spec, alpha, beta);
    return {cheapest.algorithm, closed_form_seconds(cheapest, alpha, beta)};
  }
  const std::vector<double> at_zero(static_cast<std::size_t>(spec.ranks), 0.0);
  AlgorithmChoice best;
  // In table order, so a later candidate must be strictly faster: one done exactly at
  // the best time is given up at that deadline.
  for (Algorithm a : auto_candidates(spec.kind)) {
    CollectiveSpec candidate = spec;
    candidate.algorithm = a;
    const Schedule schedule = make_schedule(candidate);
    if (best.algorithm == Algorithm::Auto) {
      best = {a, seconds_alone(model_, topology_, nominal_, candidate, schedule, grid_)};
      continue;
    }
    if (model_.messages_share_links &&
        slower_whatever_the_rounding(busiest_link_seconds(routes_, schedule), best.seconds, schedule.messages(), grid_))
      continue;
    if (const auto done = simulate_before(best.seconds, model_, topology_, schedule, at_zero, grid_))
      best = {a, last(*done)};
  }
  if (best.algorithm == Algorithm::Auto)
    throw std::logic_error(fmt::format("no auto candidate implements {}", to_string(spec.kind)));
  return best;
}

AlgorithmChoice fastest_algorithm(const NetworkModel& model, const Topology& topology, const LinkParams& nominal,
                                  const CollectiveSpec& spec, sim::TimeGrid grid) {
  return FastestAlgorithm(model, topology, nominal, grid).choose(spec);
}

}  // namespace dtsim::net
