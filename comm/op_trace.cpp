#include "comm/op_trace.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

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
    if (trace.ranks < 1 || trace.rank < 0 || trace.rank >= trace.ranks)
      throw std::invalid_argument(fmt::format("not an operation trace: rank {} of {}", trace.rank, trace.ranks));
    for (const auto& a : j.at("ops")) {
      TracedOp op;
      const int kind = a.at(0).get<int>(), dtype = a.at(2).get<int>();
      op.stream = a.at(1).get<bool>();
      op.variant = a.at(3).get<int>();
      op.numel = a.at(4).get<std::int64_t>();
      op.seconds = a.at(5).get<double>();
      op.op = a.at(6).get<std::uint64_t>();
      op.peer_slots = a.at(7).get<std::vector<int>>();
      // What the replay would act on must make sense: a file may be anything.
      auto bad = [&](const std::string& what) {
        return std::invalid_argument(fmt::format("not an operation trace: entry #{}: {}", trace.ops.size(), what));
      };
      if (kind < 0 || kind > static_cast<int>(TracedOp::Kind::Mark)) throw bad(fmt::format("unknown kind {}", kind));
      op.kind = static_cast<TracedOp::Kind>(kind);
      if (dtype < 0 || dtype >= static_cast<int>(at::ScalarType::NumOptions)) throw bad(fmt::format("dtype {}", dtype));
      op.dtype = static_cast<at::ScalarType>(dtype);
      if (op.numel < 0) throw bad(fmt::format("{} elements", op.numel));
      if (!(std::isfinite(op.seconds) && op.seconds >= 0)) throw bad(fmt::format("{} seconds", op.seconds));
      const bool phase = op.kind == TracedOp::Kind::PhaseBegin || op.kind == TracedOp::Kind::PhaseEnd;
      if (phase && (op.variant < 0 || static_cast<std::size_t>(op.variant) >= trace.phase_names.size()))
        throw bad(fmt::format("phase #{} of {}", op.variant, trace.phase_names.size()));
      if (op.kind == TracedOp::Kind::Mark && (op.variant < 0 || op.variant > static_cast<int>(TraceMark::End)))
        throw bad(fmt::format("unknown mark {}", op.variant));
      trace.ops.push_back(std::move(op));
    }
    return trace;
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("not an operation trace: ") + e.what());
  }
}

}  // namespace dtsim::comm
