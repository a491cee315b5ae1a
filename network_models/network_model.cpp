#include "network_models/network_model.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "config/closest_name.hpp"
#include "network_models/nccl/nccl_model.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {

namespace {

template <typename T>
std::unique_ptr<Transport> make(sim::Engine& engine, Topology topology, Perturbations perturbations) {
  return std::make_unique<T>(engine, std::move(topology), std::move(perturbations));
}

}  // namespace

const std::vector<NetworkModel>& network_model_table() {
  static const std::vector<NetworkModel> table{
      // Point-to-point messages (neighbour exchanges) still go uncontended.
      {.name = "analytical",
       .description = "closed forms, no contention",
       .make_transport = make<UncontendedTransport>,
       .closed_form_collectives = true,
       .relative_events_per_message = 1.0,
       .rings_as_recurrence = false,  // no ring schedules
       .faster_alternative = ""},
      {.name = "alpha_beta",
       .description = "point-to-point schedules without contention",
       .make_transport = make<UncontendedTransport>,
       .closed_form_collectives = false,
       .relative_events_per_message = 1.0,
       .rings_as_recurrence = true,
       .exact_collective_reuse = true,
       .faster_alternative = "the analytical network model (closed-form collectives)"},
      {.name = "flow",
       .description = "schedules as flows sharing links by max-min fairness",
       .make_transport = make<FlowTransport>,
       .closed_form_collectives = false,
       .relative_events_per_message = 2.0,  // a flow's start after its latency, then its completion
       .rings_as_recurrence = true,
       .exact_collective_reuse = true,
       .rings_simulate_coupled_senders = true,
       .messages_share_links = true,
       .faster_alternative = "the alpha_beta or analytical network model"},
      // A machine described in /network/system (network_models/nccl/): its transport is
      // the clock's (Network builds it); make_transport serves callers without a system.
      {.name = "nccl",
       .description = "collectives as NCCL runs them on a described machine (algorithm, protocol, channels), one at a "
                      "time; their data and the messages' share each GPU's and NIC's port by max-min fairness",
       .make_transport = make<UncontendedTransport>,
       .closed_form_collectives = true,
       .relative_events_per_message = 1.0,
       .rings_as_recurrence = false,  // no ring schedules
       .faster_alternative = "",
       .make_clock = nccl::make_clock},
  };
  return table;
}

const NetworkModel* find_network_model(std::string_view name) {
  for (const auto& m : network_model_table())
    if (m.name == name) return &m;
  return nullptr;
}

const NetworkModel& network_model(std::string_view name) {
  if (const auto* m = find_network_model(name)) return *m;
  throw std::invalid_argument(
      fmt::format("unknown network model \"{}\"{} (expected one of {})", name,
                  config::did_you_mean(name, network_models()), network_model_names()));
}

const std::vector<std::string>& network_models() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& m : network_model_table()) out.emplace_back(m.name);
    return out;
  }();
  return names;
}

std::string network_model_names(const char* separator, const char* last_separator) {
  const auto& names = network_models();
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? last_separator : separator) + names[i];
  return out;
}

}  // namespace dtsim::net
