#include "network_models/network.hpp"

#include "network_models/closed_form.hpp"
#include "network_models/collective_execution.hpp"
#include "network_models/collective_reuse.hpp"
#include "network_models/fastest_algorithm.hpp"
#include "network_models/clock_transport.hpp"
#include "network_models/network_model.hpp"
#include "network_models/topology.hpp"
#include "network_models/transport.hpp"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::net {

namespace {

// An explicit algorithm stays; Auto takes the config's choice for the kind (Auto where
// the config has none for it).
CollectiveSpec with_configured_algorithm(CollectiveSpec spec, int ranks, const NetworkConfig& config) {
  spec.ranks = ranks;
  if (spec.algorithm == Algorithm::Auto) {
    auto it = config.algorithms.find(spec.kind);
    spec.algorithm = it == config.algorithms.end() ? Algorithm::Auto : it->second;
  }
  return spec;
}

bool leaves_a_collective_to_auto(const NetworkConfig& config) {
  for (auto kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                    CollectiveKind::Broadcast}) {
    const auto it = config.algorithms.find(kind);
    if ((it == config.algorithms.end() || it->second == Algorithm::Auto) && auto_candidates(kind).size() > 1)
      return true;
  }
  return false;
}

}  // namespace

Network::Network(sim::Engine& engine, Topology topology, NetworkConfig config, std::shared_ptr<CollectiveReuse> reuse)
    : config_(std::move(config)), model_(&network_model(config_.model)), reuse_(std::move(reuse)) {
  // Kept with reuse off too: it restarts the run when a ring computed on the flow model
  // meets other traffic (ring_wavefront.hpp).
  const bool replay = config_.reuse_collectives && model_->exact_collective_reuse;
  if (!reuse_) reuse_ = std::make_shared<CollectiveReuse>(replay);
  else if (!replay) reuse_->disable_replay();
  if (!(config_.nominal.bandwidth_bytes_per_s > 0))
    throw std::invalid_argument(fmt::format("network: bandwidth must be > 0, got {}", config_.nominal.bandwidth_bytes_per_s));
  if (!(config_.nominal.latency_s >= 0))
    throw std::invalid_argument(fmt::format("network: latency must be >= 0, got {}", config_.nominal.latency_s));
  std::shared_ptr<PortFlows> ports;
  if (model_->make_clock) {
    clock_ = model_->make_clock(config_, topology.size());
    ports = std::make_shared<PortFlows>(engine, clock_->ports());
    stream_ = std::make_shared<CollectiveStream>(engine, ports);
  }
  // A described machine's clock chooses its own algorithms; `auto` is for scheduled collectives.
  if (!clock_ && !model_->closed_form_collectives && leaves_a_collective_to_auto(config_))
    fastest_ = std::make_unique<FastestAlgorithm>(*model_, topology, config_.nominal, engine.time_grid());
  transport_ = clock_ ? std::make_unique<ClockTransport>(engine, std::move(topology), config_.perturbations, clock_, ports)
                      : model_->make_transport(engine, std::move(topology), config_.perturbations);
  transport_->shortcuts().evaluate_rings(config_.evaluate_rings && model_->rings_as_recurrence);
}

Network::~Network() = default;

const Topology& Network::topology() const { return transport_->topology(); }
int Network::size() const { return topology().size(); }
sim::Engine& Network::engine() { return transport_->engine(); }

CollectiveSpec resolve_collective(CollectiveSpec spec, int ranks, const NetworkConfig& config) {
  spec = with_configured_algorithm(std::move(spec), ranks, config);
  if (spec.algorithm == Algorithm::Auto)
    spec.algorithm = cheapest_algorithm(spec, config.nominal.latency_s, config.nominal.bandwidth_bytes_per_s);
  return spec;
}

CollectiveSpec Network::resolve(CollectiveSpec spec) {
  spec = with_configured_algorithm(std::move(spec), size(), config_);
  if (spec.algorithm == Algorithm::Auto) spec.algorithm = auto_algorithm(spec);
  return spec;
}

Algorithm Network::auto_algorithm(const CollectiveSpec& spec) {
  const auto candidates = auto_candidates(spec.kind);
  // One candidate (every collective but all-reduce): nothing to simulate, which also
  // spares all-gathers of data-dependent blocks a decision per distinct shape.
  if (candidates.size() == 1) return candidates.front();
  if (model_->closed_form_collectives)
    return cheapest_algorithm(spec, config_.nominal.latency_s, config_.nominal.bandwidth_bytes_per_s);
  if (!fastest_)  // made by the constructor where the config leaves a kind to `auto`
    throw std::logic_error(fmt::format("auto {}: the network kept no topology to simulate on", to_string(spec.kind)));
  std::string shape = reuse_shape(spec);
  if (const auto it = auto_choices_.find(shape); it != auto_choices_.end()) return it->second;
  const Algorithm best = fastest_->choose(spec).algorithm;
  auto_choices_.emplace(std::move(shape), best);
  return best;
}

std::shared_ptr<Execution> Network::collective(const CollectiveSpec& spec, std::shared_ptr<const Schedule> schedule,
                                               Execution::RankDone done) {
  return start(spec, std::move(schedule), std::move(done), reuse_shape(spec));
}

std::shared_ptr<Execution> Network::start(const CollectiveSpec& spec, std::shared_ptr<const Schedule> schedule,
                                          Execution::RankDone done, std::string shape) {
  if (model_->closed_form_collectives) {
    const CollectiveTiming timing =
        clock_ ? clock_->collective_timing(spec)
               : CollectiveTiming{.seconds = closed_form_seconds(spec, config_.nominal.latency_s, config_.nominal.bandwidth_bytes_per_s)};
    return std::make_shared<ClosedFormExecution>(engine(), size(), timing, std::move(done), stream_);
  }
  return std::make_shared<ScheduledExecution>(*transport_, std::move(schedule), std::move(done), reuse_.get(),
                                              std::move(shape));
}

std::shared_ptr<const CollectivePlan> Network::plan(const CollectiveSpec& resolved) {
  std::string shape = reuse_shape(resolved);
  if (const auto it = plans_.find(shape); it != plans_.end()) return it->second;
  if (plans_.size() >= kMaxPlans) plans_.clear();  // shapes that do not repeat (data-dependent blocks)
  auto plan = std::make_shared<CollectivePlan>();
  plan->spec = resolved;
  plan->schedule = std::make_shared<const Schedule>(make_schedule(resolved));
  plan->bytes_sent.reserve(static_cast<std::size_t>(plan->schedule->size()));
  for (int r = 0; r < plan->schedule->size(); ++r) plan->bytes_sent.push_back(plan->schedule->bytes_sent(r));
  plan->shape = shape;
  return plans_.emplace(std::move(shape), std::move(plan)).first->second;
}

std::shared_ptr<Execution> Network::collective(const CollectivePlan& plan, Execution::RankDone done) {
  return start(plan.spec, plan.schedule, std::move(done), plan.shape);
}

std::string reuse_shape(const CollectiveSpec& spec) {
  std::string s = fmt::format("{} {} of {} x {} B on {} ranks, root {}", to_string(spec.algorithm), to_string(spec.kind),
                              spec.elements, spec.element_size, spec.ranks, spec.root);
  if (!spec.block_elements.empty()) s += fmt::format(", blocks {}", fmt::join(spec.block_elements, " "));
  return s;
}

void Network::send(int src, int dst, double bytes, std::function<void()> arrived) {
  transport_->send(src, dst, bytes, std::move(arrived));
}

}  // namespace dtsim::net
