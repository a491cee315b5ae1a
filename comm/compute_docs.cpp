#include "comm/compute_docs.hpp"

namespace dtsim::comm {

std::span<const config::FieldDoc> compute_docs() {
  static constexpr config::FieldDoc docs[] = {
    {"compute", "", "How compute phases advance a rank's clock."},
    {"compute", "timing", "cost_model: the stated cost of each phase (deterministic); measured: its wall time"},
    {"compute", "gflops", "cost model: flop rate, 1e9 per second"},
    {"compute", "memory_GBps", "cost model: memory bandwidth, 1e9 bytes per second"},
    {"compute", "stragglers", "slow ranks",
     R"json({"type": "array", "items": {"type": "object", "additionalProperties": false, "description": "rank's compute takes slowdown times longer", "required": ["rank", "slowdown"], "properties": {"rank": {"type": "integer", "description": "rank (< ranks)", "minimum": 0}, "slowdown": {"type": "number", "description": "factor", "exclusiveMinimum": 0}}}})json"},
  };
  return docs;
}

}  // namespace dtsim::comm
