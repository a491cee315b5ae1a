#include "comm/op_trace.hpp"
#include "config/scenario_error.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <stdexcept>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "comm/communicator.hpp"

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

namespace {

constexpr int kMaxDepth = 16;  // a trace nests 3 levels: {ops: [[..., peer_slots]]}

// A trace file is a user's input (dtsim replay --traces): bad bytes are bad input.
config::InputError not_a_trace(const std::string& what) { return config::InputError("not an operation trace: " + what); }

// nlohmann's MessagePack reader recurses once per level of nesting, so a few hundred KB
// of 0x91 (an array of one array of one ...) overflow the stack. This walk follows the
// container headers iteratively and refuses deeper nesting than any trace has; whatever
// else is wrong with the bytes (truncation, reserved bytes) it leaves to nlohmann.
void check_nesting(const std::vector<std::uint8_t>& b) {
  std::vector<std::uint64_t> open;  // per open container: values still to come
  std::size_t i = 0;
  auto be = [&](std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v = (v << 8) | b[at + k];
    return v;
  };
  while (i < b.size()) {
    const std::uint8_t c = b[i];
    std::uint64_t children = 0, skip = 0;  // skip: bytes after the header
    std::size_t header = 1;
    auto length = [&](int bytes) {  // a length of `bytes` bytes follows the type byte
      if (i + 1 + bytes > b.size()) return false;
      header = 1 + bytes;
      skip = be(i + 1, bytes);
      return true;
    };
    if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
    } else if (c <= 0x8f) {
      children = 2u * (c & 0x0f);
    } else if (c <= 0x9f) {
      children = c & 0x0f;
    } else if (c <= 0xbf) {
      skip = c & 0x1f;
    } else if (c == 0xc4 || c == 0xd9) {
      if (!length(1)) return;
    } else if (c == 0xc5 || c == 0xda) {
      if (!length(2)) return;
    } else if (c == 0xc6 || c == 0xdb) {
      if (!length(4)) return;
    } else if (c == 0xc7 || c == 0xc8 || c == 0xc9) {  // ext 8/16/32: length, type, data
      if (!length(c == 0xc7 ? 1 : c == 0xc8 ? 2 : 4)) return;
      skip += 1;
    } else if (c == 0xca || c == 0xce || c == 0xd2) {
      skip = 4;
    } else if (c == 0xcb || c == 0xcf || c == 0xd3) {
      skip = 8;
    } else if (c == 0xcc || c == 0xd0) {
      skip = 1;
    } else if (c == 0xcd || c == 0xd1) {
      skip = 2;
    } else if (c >= 0xd4 && c <= 0xd8) {  // fixext 1, 2, 4, 8, 16: type and data
      skip = 1 + (std::uint64_t{1} << (c - 0xd4));
    } else if (c == 0xdc || c == 0xdd || c == 0xde || c == 0xdf) {
      const int bytes = c == 0xdc || c == 0xde ? 2 : 4;
      if (i + 1 + bytes > b.size()) return;
      header = 1 + bytes;
      children = be(i + 1, bytes) * (c >= 0xde ? 2 : 1);
    } else {
      return;  // 0xc1, never used: nlohmann names it
    }
    if (skip > b.size() - i - header) return;  // truncated: nlohmann says where
    i += header + static_cast<std::size_t>(skip);
    // This value fills a slot of the innermost open container; finished ones close.
    if (!open.empty()) --open.back();
    if (children > 0) {
      if (open.size() >= static_cast<std::size_t>(kMaxDepth))
        throw not_a_trace(fmt::format("offset {}: expected at most {} levels of nesting, got more", i - header,
                                      kMaxDepth));
      open.push_back(children);
    }
    while (!open.empty() && open.back() == 0) open.pop_back();
  }
}

// `v` as an integer in [lo, hi]: not a float, not a bool, nothing that a cast would wrap.
template <typename T>
T integer_field(const json& v, const std::string& where, T lo, T hi) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (std::cmp_greater_equal(u, lo) && std::cmp_less_equal(u, hi)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (std::cmp_greater_equal(x, lo) && std::cmp_less_equal(x, hi)) return static_cast<T>(x);
  }
  throw std::invalid_argument(fmt::format("{}: expected an integer in [{}, {}], got {}", where, lo, hi,
                                          v.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 40)));
}

// `v` as an int, when it is an integer that fits one.
std::optional<int> as_int(const json& v) {
  if (v.is_number_unsigned()) {
    if (const auto u = v.get<std::uint64_t>(); std::in_range<int>(u)) return static_cast<int>(u);
  } else if (v.is_number_integer()) {
    if (const auto x = v.get<std::int64_t>(); std::in_range<int>(x)) return static_cast<int>(x);
  }
  return std::nullopt;
}

const json& member(const json& j, const char* key) {
  if (!j.is_object()) throw std::invalid_argument("expected a map with rank, ranks, operations, phase_names and ops");
  auto it = j.find(key);
  if (it == j.end()) throw std::invalid_argument(fmt::format("/{}: missing", key));
  return *it;
}

}  // namespace

OpTrace op_trace_from_bytes(const std::vector<std::uint8_t>& bytes) {
  check_nesting(bytes);
  json j;
  try {
    j = json::from_msgpack(bytes);
  } catch (const json::parse_error& e) {
    // "[json.exception.parse_error.110] parse error at byte 17: syntax error ...": the offset, then the reason.
    std::string what = e.what();
    if (auto p = what.find(": "); p != std::string::npos && what.find("parse error") < p) what = what.substr(p + 2);
    throw not_a_trace(fmt::format("offset {}: {}", e.byte, what));
  } catch (const json::exception& e) {
    throw not_a_trace(e.what());
  }
  constexpr auto kIntMax = std::numeric_limits<int>::max();
  constexpr auto kI64Max = std::numeric_limits<std::int64_t>::max();
  OpTrace trace;
  try {
    trace.ranks = integer_field<int>(member(j, "ranks"), "/ranks", 1, kIntMax);
    trace.rank = integer_field<int>(member(j, "rank"), "/rank", 0, trace.ranks - 1);
    trace.operations = integer_field<std::uint64_t>(member(j, "operations"), "/operations", 0,
                                                    std::numeric_limits<std::uint64_t>::max());
    const json& names = member(j, "phase_names");
    if (!names.is_array()) throw std::invalid_argument("/phase_names: expected an array of strings");
    for (const auto& name : names) {
      if (!name.is_string()) throw std::invalid_argument("/phase_names: expected an array of strings");
      trace.phase_names.push_back(name.get<std::string>());
    }
    const json& ops = member(j, "ops");
    if (!ops.is_array()) throw std::invalid_argument("/ops: expected an array");
    for (const auto& a : ops) {
      TracedOp op;
      const std::string at = fmt::format("entry #{}", trace.ops.size());
      // What the replay would act on must make sense: a file may be anything.
      auto bad = [&](const std::string& what) { return std::invalid_argument(fmt::format("{}: {}", at, what)); };
      if (!a.is_array() || a.size() != 8)
        throw bad("expected [kind, stream, dtype, variant, numel, seconds, op, peer_slots]");
      auto text = [](const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 40); };
      const auto kind = as_int(a[0]);
      if (!kind || *kind < 0 || *kind > static_cast<int>(TracedOp::Kind::Mark)) throw bad("unknown kind " + text(a[0]));
      op.kind = static_cast<TracedOp::Kind>(*kind);
      if (!a[1].is_boolean()) throw bad("stream: expected true or false, got " + text(a[1]));
      op.stream = a[1].get<bool>();
      const auto dtype = as_int(a[2]);
      if (!dtype || *dtype < 0 || *dtype >= static_cast<int>(at::ScalarType::NumOptions)) throw bad("dtype " + text(a[2]));
      op.dtype = static_cast<at::ScalarType>(*dtype);
      op.variant = integer_field<int>(a[3], at + ": variant", std::numeric_limits<int>::min(), kIntMax);
      op.numel = integer_field<std::int64_t>(a[4], at + ": numel", std::numeric_limits<std::int64_t>::min(), kI64Max);
      if (!a[5].is_number()) throw bad("seconds: expected a number, got " + text(a[5]));
      op.seconds = a[5].get<double>();
      op.op = integer_field<std::uint64_t>(a[6], at + ": op", 0, std::numeric_limits<std::uint64_t>::max());
      if (!a[7].is_array()) throw bad("peer_slots: expected an array of integers");
      for (const auto& slot : a[7]) op.peer_slots.push_back(integer_field<int>(slot, at + ": peer_slots", 0, kIntMax));
      if (op.numel < 0) throw bad(fmt::format("{} elements", op.numel));
      if (!(std::isfinite(op.seconds) && op.seconds >= 0)) throw bad(fmt::format("{} seconds", op.seconds));
      const bool phase = op.kind == TracedOp::Kind::PhaseBegin || op.kind == TracedOp::Kind::PhaseEnd;
      if (phase && (op.variant < 0 || static_cast<std::size_t>(op.variant) >= trace.phase_names.size()))
        throw bad(fmt::format("phase #{} of {}", op.variant, trace.phase_names.size()));
      if (op.kind == TracedOp::Kind::Mark && (op.variant < 0 || op.variant > static_cast<int>(TraceMark::End)))
        throw bad(fmt::format("unknown mark {}", op.variant));
      if (op.kind == TracedOp::Kind::AllReduce && (op.variant < 0 || op.variant > static_cast<int>(ReduceOp::Average)))
        throw bad(fmt::format("unknown reduction {}", op.variant));
      if (op.kind == TracedOp::Kind::Broadcast && (op.variant < 0 || op.variant >= trace.ranks))
        throw bad(fmt::format("broadcast root {} of {} ranks", op.variant, trace.ranks));
      if ((op.kind == TracedOp::Kind::Send || op.kind == TracedOp::Kind::Recv) && op.variant < 0)
        throw bad(fmt::format("neighbour slot {}", op.variant));
      trace.ops.push_back(std::move(op));
    }
  } catch (const std::invalid_argument& e) {
    throw not_a_trace(e.what());
  }
  return trace;
}

}  // namespace dtsim::comm
