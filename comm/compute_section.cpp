#include "comm/compute_section.hpp"

#include <fmt/format.h>

namespace dtsim::comm {

using config::kInf;
using nlohmann::json;

ComputeTiming parse_compute_section(config::ObjectReader& c, int ranks) {
  ComputeTiming compute;
  const auto timing = c.choice("timing", "cost_model", {"cost_model", "measured"});
  compute.kind = timing == "measured" ? ComputeTiming::Kind::Measured : ComputeTiming::Kind::CostModel;
  compute.model.flops_per_s = c.number("gflops", 1000.0, 0.0, kInf, true) * 1e9;
  compute.model.bytes_per_s = c.number("memory_GBps", 100.0, 0.0, kInf, true) * 1e9;
  if (const json* stragglers = c.find("stragglers")) {
    if (!stragglers->is_array())
      throw config::ScenarioError(c.where("stragglers"), config::ErrorKind::wrong_type,
                                  "expected an array of {rank, slowdown}, got " + config::describe(*stragglers));
    compute.slowdown.assign(static_cast<std::size_t>(ranks), 1.0);
    for (std::size_t i = 0; i < stragglers->size(); ++i) {
      config::ObjectReader st((*stragglers)[i], c.where("stragglers") + fmt::format("/{}", i));
      const auto rank = st.integer("rank", std::nullopt, 0, ranks - 1);
      compute.slowdown[static_cast<std::size_t>(rank)] = st.number("slowdown", std::nullopt, 0.0, kInf, true);
      st.finish();
    }
  }
  c.finish();
  return compute;
}

json compute_section_json(const ComputeTiming& compute) {
  const bool measured = compute.kind == ComputeTiming::Kind::Measured;
  json comp = {{"timing", measured ? "measured" : "cost_model"},
               {"gflops", compute.model.flops_per_s / 1e9},
               {"memory_GBps", compute.model.bytes_per_s / 1e9}};
  if (!compute.slowdown.empty()) {
    comp["stragglers"] = json::array();
    for (std::size_t r = 0; r < compute.slowdown.size(); ++r)
      if (compute.slowdown[r] != 1.0) comp["stragglers"].push_back({{"rank", r}, {"slowdown", compute.slowdown[r]}});
  }
  return comp;
}

}  // namespace dtsim::comm
