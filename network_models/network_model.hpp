// net::NetworkModel: the network models a scenario's "network.model" and
// `dtsim collective --model` name, in one table (network_model.cpp), the only place
// their names are listed. Each entry says how the model moves point-to-point messages
// (its transport), whether collectives run as closed forms or as their schedules'
// messages on that transport, and what resource estimates need to know about its cost.
//
// Adding a model: its Transport (a new file, see transport.hpp) and one entry in the
// table; everything that names or lists models (the scenario parser, the CLI, calibrated
// model files, runner::estimate_resources) reads the table.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "network_models/perturbations.hpp"

namespace dtsim::sim {
class Engine;
}

namespace dtsim::net {

class MachineClock;
struct NetworkConfig;
class Topology;
class Transport;

struct NetworkModel {
  std::string_view name;         // as scenarios and the command line spell it
  std::string_view description;  // one line, as scenario.schema.json states it
  // Makes the transport that carries this model's point-to-point messages (neighbour
  // exchanges, and collectives unless they are closed forms).
  std::unique_ptr<Transport> (*make_transport)(sim::Engine& engine, Topology topology, Perturbations perturbations);
  // True: a collective waits for its last rank and ends a closed-form time later (no
  // messages, no routes); false: its schedule's messages go over the transport.
  bool closed_form_collectives;
  // Engine events per point-to-point message, relative to the uncontended transport's
  // one (a flow also has its completion): scales runner::estimate_resources' event count.
  double relative_events_per_message;
  // The exact shortcuts this model allows: each is taken only where the entry says its
  // exactness argument holds for the model, so a new model runs the plain message path
  // until it opts in (and the equivalence tests, which iterate this table, check it).
  //
  // Whether ring collectives are computed from their recurrence instead of simulated
  // message by message: all of a ring where messages never interact (ring_recurrence.hpp);
  // on the flow model, its senders whose routes share no link with another's (all but a
  // few on rings, tori, stars and fat trees: ring_wavefront.hpp; a conflict restarts
  // the run). With NetworkConfig::evaluate_rings.
  bool rings_as_recurrence;
  // Whether a collective whose ranks arrive as at a recorded one, on a network in the
  // same state, may be replayed from the record (collective_reuse.hpp): true where the
  // transport's times depend only on those offsets and the links' state, as on the
  // uncontended and flow transports. With NetworkConfig::reuse_collectives.
  bool exact_collective_reuse = false;
  // Whether a ring's senders whose routes share a link (coupled) are still simulated
  // message by message (the flow model: their messages share bandwidth).
  bool rings_simulate_coupled_senders = false;
  // Whether messages crossing one link share its bandwidth (the flow model): then no
  // schedule is done sooner than its busiest link's bytes over that link's bandwidth,
  // the bound by which `auto` skips slow candidates unsimulated (fastest_algorithm.hpp).
  bool messages_share_links = false;
  // A cheaper model to suggest when a run would be long ("" where none is cheaper).
  std::string_view faster_alternative;
  // Models of a described machine (nccl): its clock for a job of `ranks` ranks times the
  // closed-form collectives and the point-to-point messages (machine_clock.hpp) instead of
  // the alpha-beta closed forms and the topology's links; it reads what the config holds for
  // it (NetworkConfig::nccl), and the scenario's /network/system instead of latency_us and
  // bandwidth_GBps. Null for the others.
  std::shared_ptr<const MachineClock> (*make_clock)(const NetworkConfig& config, int ranks) = nullptr;
};

// Every model, in the order help texts and error messages list them (cheapest first).
const std::vector<NetworkModel>& network_model_table();
// The model named `name`, or nullptr.
const NetworkModel* find_network_model(std::string_view name);
// The model named `name`; throws std::invalid_argument "unknown network model \"x\"
// (expected one of analytical, alpha_beta, flow)" otherwise.
const NetworkModel& network_model(std::string_view name);
// The names, in table order (the scenario parser's "expected one of ...").
const std::vector<std::string>& network_models();
// The names joined by `separator` and, before the last one, `last_separator`
// ("analytical, alpha_beta, flow"; "analytical, alpha_beta or flow" for help texts).
std::string network_model_names(const char* separator = ", ", const char* last_separator = ", ");

}  // namespace dtsim::net
