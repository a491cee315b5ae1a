// The scenario's /compute section: parse and to_json, next to the ComputeTiming it fills.
#pragma once

#include <nlohmann/json.hpp>

#include "comm/compute_timing.hpp"
#include "config/object_reader.hpp"

namespace dtsim::comm {

// "timing" (cost_model or measured), the cost model's gflops and memory_GBps, and
// stragglers ({rank, slowdown} for some of the `ranks` ranks).
ComputeTiming parse_compute_section(config::ObjectReader& c, int ranks);
nlohmann::json compute_section_json(const ComputeTiming& compute);

}  // namespace dtsim::comm
