#include "comm/op_trace.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace dtsim::comm {

using nlohmann::json;

// Each operation as an array [kind, stream, dtype, variant, numel, seconds, op, peer_slots]:
// a trace has one per operation, and names would triple its size.
std::vector<std::uint8_t> to_bytes(const OpTrace& trace) {
  json ops = json::array();
  for (const auto& op : trace.ops)
    ops.push_back(json::array({static_cast<int>(op.kind), op.stream, static_cast<int>(op.dtype), op.variant, op.numel,
                               op.seconds, op.op, op.peer_slots}));
  const json j = {{"rank", trace.rank},
                  {"ranks", trace.ranks},
                  {"operations", trace.operations},
                  {"phase_names", trace.phase_names},
                  {"ops", std::move(ops)}};
  return json::to_msgpack(j);
}

OpTrace op_trace_from_bytes(const std::vector<std::uint8_t>& bytes) {
  try {
    const json j = json::from_msgpack(bytes);
    OpTrace trace;
    trace.rank = j.at("rank").get<int>();
    trace.ranks = j.at("ranks").get<int>();
    trace.operations = j.at("operations").get<std::uint64_t>();
    trace.phase_names = j.at("phase_names").get<std::vector<std::string>>();
    for (const auto& a : j.at("ops")) {
      TracedOp op;
      const int kind = a.at(0).get<int>();
      if (kind < 0 || kind > static_cast<int>(TracedOp::Kind::Mark)) throw std::invalid_argument("unknown kind");
      op.kind = static_cast<TracedOp::Kind>(kind);
      op.stream = a.at(1).get<bool>();
      op.dtype = static_cast<at::ScalarType>(a.at(2).get<int>());
      op.variant = a.at(3).get<int>();
      op.numel = a.at(4).get<std::int64_t>();
      op.seconds = a.at(5).get<double>();
      op.op = a.at(6).get<std::uint64_t>();
      op.peer_slots = a.at(7).get<std::vector<int>>();
      trace.ops.push_back(std::move(op));
    }
    return trace;
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("not an operation trace: ") + e.what());
  }
}

}  // namespace dtsim::comm
