#include "algorithms/registry.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/algorithm.hpp"
#include "algorithms/spec_fields.hpp"

namespace dtsim::algorithms {

// Each entry is defined next to its algorithm (the file named on its line).
const AlgorithmEntry& parallel_sgd_entry();       // parallel_sgd.cpp
const AlgorithmEntry& choco_sgd_entry();          // choco_sgd.cpp
const AlgorithmEntry& dcd_psgd_entry();           // dcd_psgd.cpp
const AlgorithmEntry& ecd_psgd_entry();           // ecd_psgd.cpp
const AlgorithmEntry& deepsqueeze_entry();        // deepsqueeze.cpp
const AlgorithmEntry& sparsified_sgd_entry();     // sparsified_sgd.cpp
const AlgorithmEntry& sign_sgd_entry();           // sign_sgd.cpp
const AlgorithmEntry& ef_sign_sgd_entry();        // ef_sign_sgd.cpp
const AlgorithmEntry& local_sgd_entry();          // local_sgd.cpp
const AlgorithmEntry& local_sign_sgd_entry();     // local_sign_sgd.cpp
const AlgorithmEntry& local_ef_sign_sgd_entry();  // local_ef_sign_sgd.cpp
const AlgorithmEntry& distopt_entry();            // distopt.cpp
const AlgorithmEntry& ddp_entry();                // ddp.cpp
const AlgorithmEntry& diloco_entry();             // diloco.cpp
const AlgorithmEntry& streaming_diloco_entry();   // streaming_diloco.cpp
const AlgorithmEntry& sparseloco_entry();         // sparseloco.cpp
const AlgorithmEntry& demo_entry();               // demo.cpp
const AlgorithmEntry& one_bit_adam_entry();       // one_bit_adam.cpp

std::span<const AlgorithmEntry* const> algorithm_entries() {
  static const std::vector<const AlgorithmEntry*> table{
      &parallel_sgd_entry(),   &choco_sgd_entry(),      &dcd_psgd_entry(),       &ecd_psgd_entry(),
      &deepsqueeze_entry(),    &sparsified_sgd_entry(), &sign_sgd_entry(),       &ef_sign_sgd_entry(),
      &local_sgd_entry(),      &local_sign_sgd_entry(), &local_ef_sign_sgd_entry(), &distopt_entry(),
      &ddp_entry(),
      &diloco_entry(), &streaming_diloco_entry(), &sparseloco_entry(),
      &demo_entry(),           &one_bit_adam_entry()};
  return table;
}

const AlgorithmEntry* find_algorithm(std::string_view name) {
  for (const auto* entry : algorithm_entries())
    if (entry->name == name) return entry;
  return nullptr;
}

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto* entry : algorithm_entries()) v.push_back(entry->name);
    return v;
  }();
  return names;
}

namespace {

const AlgorithmEntry& entry_of(const std::string& name) {
  const auto* entry = find_algorithm(name);
  if (!entry)
    throw std::invalid_argument(
        fmt::format("unknown algorithm \"{}\" (expected one of: {})", name, fmt::join(algorithm_names(), ", ")));
  return *entry;
}

}  // namespace

const std::vector<std::string>& algorithm_fields(const std::string& name) { return entry_of(name).fields; }

AlgorithmSpec parse_algorithm_section(config::ObjectReader& a, const SpecContext& ctx) {
  AlgorithmSpec spec;
  spec.name = a.choice("name", std::nullopt, algorithm_names());
  const auto& entry = entry_of(spec.name);
  const std::vector<std::string> except{"name"};
  a.only_fields(entry.fields, except, "algorithm " + spec.name);
  parse_optimizer(a, spec.optimizer);
  entry.parse(a, spec, ctx);
  a.finish();
  return spec;
}

nlohmann::json algorithm_section_json(const AlgorithmSpec& spec) {
  nlohmann::json out = {{"name", spec.name}};
  optimizer_json(spec.optimizer, out);
  const auto& entry = entry_of(spec.name);
  // An entry that reads only some of the optimizer's fields (DeMo and 1-bit Adam take no
  // SGD momentum) echoes only those, so that its echo parses again.
  for (const auto& field : optimizer_fields())
    if (std::find(entry.fields.begin(), entry.fields.end(), field) == entry.fields.end()) out.erase(field);
  entry.to_json(spec, out);
  return out;
}

MemoryFootprint memory_footprint(const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t steps) {
  return entry_of(spec.name).memory(spec, sizes, steps);
}

std::unique_ptr<Algorithm> make_algorithm(const AlgorithmSpec& spec, const net::Topology& topology, int rank) {
  return entry_of(spec.name).make(spec, topology, rank);
}

}  // namespace dtsim::algorithms
