#include "cli/list_command.hpp"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/lr_schedule.hpp"
#include "algorithms/optimizers/optimizer.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"
#include "cli/exit_codes.hpp"
#include "kernels/compressor_kinds.hpp"
#include "network_models/nccl/presets.hpp"
#include "network_models/nccl/tuning.hpp"
#include "network_models/network_model.hpp"
#include "network_models/topology_kinds.hpp"
#include "runner/result_fields.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::cli {

namespace {

// Text in a Markdown table cell: a "|" (as in |x|) would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

template <class List>
std::string joined(const List& fields) {
  if (fields.empty()) return "-";
  std::vector<std::string> quoted;
  for (const auto& f : fields) quoted.push_back(fmt::format("`{}`", f));
  return fmt::format("{}", fmt::join(quoted, ", "));
}

std::string algorithms_table() {
  std::string out = "| algorithm | what it does | fields besides the optimizer's | after |\n|---|---|---|---|\n";
  for (const auto* e : algorithms::algorithm_entries()) {
    std::vector<std::string> own;
    for (const auto& f : e->fields)
      if (std::find(algorithms::optimizer_fields().begin(), algorithms::optimizer_fields().end(), f) ==
          algorithms::optimizer_fields().end())
        own.push_back(f);
    out += fmt::format("| `{}` | {} | {} | {} |\n", e->name, cell(e->description), joined(own), cell(e->paper));
  }
  return out;
}

std::string optimizers_table() {
  std::string out = "| optimizer | what it does | fields besides `name` | after |\n|---|---|---|---|\n";
  for (const auto* e : algorithms::optimizers::optimizer_entries())
    out += fmt::format("| `{}` | {} | {} | {} |\n", e->name, cell(e->description), joined(e->fields), cell(e->paper));
  return out;
}

std::string lr_schedules_table() {
  std::string out = fmt::format("| lr schedule type | the lr of step t | fields besides those every type reads ({}) |\n"
                                "|---|---|---|\n",
                                joined(algorithms::lr_schedule_common_fields()));
  for (const auto* e : algorithms::lr_schedule_entries())
    out += fmt::format("| `{}` | {} | {} |\n", e->name, cell(e->description), joined(e->fields));
  return out;
}

std::string workloads_table() {
  std::string out = "| workload type | what it is | data (default first) | fields besides the data's |\n|---|---|---|---|\n";
  for (const auto* e : workloads::workload_entries()) {
    const auto data_fields = workloads::with_data_fields({}, e->data_sources);
    std::vector<std::string> own;
    for (const auto& f : e->fields)
      if (e->data_sources.empty() || std::find(data_fields.begin(), data_fields.end(), f) == data_fields.end())
        own.push_back(f);
    out += fmt::format("| `{}` | {} | {} | {} |\n", e->name, cell(e->description),
                       e->data_sources.empty() ? std::string("-") : joined(e->data_sources), joined(own));
  }
  return out;
}

std::string data_table() {
  std::string out = "| data source | what it is | fields |\n|---|---|---|\n";
  for (const auto* e : workloads::data_source_entries())
    out += fmt::format("| `{}` | {} | {} |\n", e->name, cell(e->description), joined(e->fields));
  return out;
}

std::string compressors_table() {
  std::string out = "| compressor kind | what it sends | fields | after |\n|---|---|---|---|\n";
  for (const auto& k : kernels::compressor_kinds())
    out += fmt::format("| `{}` | {} | {} | {} |\n", k.name, cell(k.description), joined(k.field_names()),
                       k.paper.empty() ? "-" : cell(k.paper));
  return out;
}

std::string networks_table() {
  std::string out = "| network model | how it times messages |\n|---|---|\n";
  for (const auto& m : net::network_model_table()) out += fmt::format("| `{}` | {} |\n", m.name, cell(m.description));
  return out;
}

// The nccl model's named machines, with what NCCL makes of one node (tuning.hpp).
std::string systems_table() {
  std::string out = "| system | what it is | NCCL's graph on one node | network | host launch per GPU | source |\n"
                    "|---|---|---|---|---|---|\n";
  for (const auto& s : net::nccl::system_presets()) {
    const auto m = net::nccl::make_machine(s, s.gpus_per_node);
    const auto& ring = m.graphs[net::nccl::index(net::nccl::Algo::Ring)];
    std::string graph = fmt::format("ring {} x {:g} GB/s, {} channels", ring.channels, ring.bw_intra, m.channels);
    if (m.nvls) {
      const auto& nv = m.graphs[net::nccl::index(net::nccl::Algo::Nvls)];
      graph += fmt::format("; NVLS {} x {:g} GB/s, {} channels", nv.channels, nv.bw_intra, m.nvls_channels);
    }
    graph += fmt::format(" (NCCL {})", net::nccl::to_string(s.nccl));
    const std::string network = s.network.nics_per_node > 0
                                    ? fmt::format("{} x {:g} Gb/s, {} rails", s.network.nics_per_node, s.network.nic_Gbps, s.network.rails)
                                    : std::string("-");
    out += fmt::format("| `{}` | {} | {} | {} | {:g} us | {} |\n", s.name, cell(s.description), graph, network,
                       s.host.launch_us, cell(s.source));
  }
  return out;
}

// The NCCL releases the nccl model holds the constants and rules of (tuning.hpp).
std::string nccl_releases_table() {
  std::string out = "| nccl_version | patch releases | PyTorch wheels | what it changes |\n|---|---|---|---|\n";
  for (const auto& r : net::nccl::nccl_releases())
    out += fmt::format("| `{}` | {} | {} | {} |\n", r.series, fmt::join(r.patches, ", "), r.pytorch, cell(r.changes));
  return out;
}

std::string topologies_table() {
  std::string out = "| topology kind | what it is | fields | command line |\n|---|---|---|---|\n";
  for (const auto& k : net::topology_kind_table())
    out += fmt::format("| `{}` | {} | {} | {} |\n", k.name, cell(k.description), joined(k.fields),
                       k.short_form.empty() ? std::string("-") : fmt::format("`{}`", k.short_form));
  return out;
}

struct Table {
  const char* name;
  std::string (*make)();
};

const std::vector<Table>& tables() {
  static const std::vector<Table> t{{"algorithms", algorithms_table},
                                    {"optimizers", optimizers_table},
                                    {"lr_schedules", lr_schedules_table},
                                    {"workloads", workloads_table},
                                    {"data", data_table},
                                    {"compressors", compressors_table},
                                    {"networks", networks_table},
                                    {"topologies", topologies_table},
                                    {"systems", systems_table},
                                    {"nccl_releases", nccl_releases_table},
                                    {"results", runner::result_fields_markdown}};
  return t;
}

}  // namespace

std::string list_tables(const std::string& what) {
  std::string out;
  for (const auto& t : tables()) {
    if (!what.empty() && what != t.name) continue;
    if (!out.empty()) out += "\n";
    out += t.make();
  }
  return out;
}

ListCommand::ListCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("list", "Print what this dtsim knows (algorithms, their optimizers and lr schedules, workload types, data sources, compressor "
                                    "kinds, network models, topologies, the nccl model's systems and NCCL releases) from its registries, and the "
                                    "result file's fields, as Markdown tables");
  std::vector<std::string> names;
  for (const auto& t : tables()) names.push_back(t.name);
  cmd_->add_option("what", what_, fmt::format("One table: {} (default: all)", fmt::join(names, ", ")))
      ->check(CLI::IsMember(names));
}

std::optional<int> ListCommand::run() const {
  if (!cmd_->parsed()) return std::nullopt;
  return exit_code_of([&] {
    std::fputs(list_tables(what_).c_str(), stdout);
    return 0;
  });
}

}  // namespace dtsim::cli
