#include "sim/trace_writer.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::sim {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not one (bad lead
// byte, missing or bad continuation, overlong form, surrogate, or beyond U+10FFFF).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) n = 2;
  else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else
    return 0;
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

// JSON has no NaN or infinity; an argument that is one is written as null.
std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

void require_finite(double t, const std::string& name) {
  if (!std::isfinite(t)) throw std::invalid_argument(fmt::format("TraceWriter: event '{}' at time {}", name, t));
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const std::size_t n = utf8_sequence_length(s, i)) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER, for one bad byte
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
  return out;
}

TraceArg::TraceArg(std::string key, std::string_view value) : key_(std::move(key)), json_(json_quote(value)) {}

TraceArg::TraceArg(std::string key, double value) : key_(std::move(key)), json_(json_number(value)) {}

TraceWriter::TrackId TraceWriter::track(const std::string& process, const std::string& thread) {
  const auto [it, inserted] = track_index_.try_emplace({process, thread}, tracks_.size());
  if (inserted) {
    // pids and tids count from 1: some viewers treat 0 specially.
    auto& [pid, threads] = processes_.try_emplace(process, static_cast<int>(processes_.size()) + 1, 0).first->second;
    tracks_.push_back(Track{pid, ++threads, process, thread});
  }
  return TrackId{it->second};
}

void TraceWriter::add(char phase, TrackId track, std::string name, double start_s, double end_s, std::string args) {
  if (track.index >= tracks_.size())
    throw std::invalid_argument(fmt::format("TraceWriter: event '{}' on an unknown track", name));
  require_finite(start_s, name);
  require_finite(end_s, name);
  if (end_s < start_s)
    throw std::invalid_argument(fmt::format("TraceWriter: event '{}' ends ({}) before it starts ({})", name, end_s, start_s));
  // The duration is taken in seconds first, so a short span late in a run keeps its
  // precision.
  events_.push_back(Event{phase, track, std::move(name), start_s * 1e6, (end_s - start_s) * 1e6, std::move(args)});
}

namespace {
std::string render_args(const TraceArgs& args) {
  if (args.empty()) return {};
  std::string out = "{";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i) out += ',';
    out += json_quote(args[i].key());
    out += ':';
    out += args[i].json();
  }
  out += '}';
  return out;
}
}  // namespace

void TraceWriter::complete(TrackId track, std::string name, double start_s, double end_s, TraceArgs args) {
  add('X', track, std::move(name), start_s, end_s, render_args(args));
}

void TraceWriter::instant(TrackId track, std::string name, double t_s, TraceArgs args) {
  add('i', track, std::move(name), t_s, t_s, render_args(args));
}

void TraceWriter::counter(TrackId track, std::string name, double t_s, double value) {
  add('C', track, std::move(name), t_s, t_s, "{\"value\":" + json_number(value) + "}");
}

void TraceWriter::write(std::ostream& out) const {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  const char* separator = "\n";
  auto line = [&](const std::string& text) {
    out << separator << text;
    separator = ",\n";
  };
  // Sort indices keep tracks in the order they were created rather than by name.
  int last_pid = 0;
  for (const auto& t : tracks_) {
    if (t.pid > last_pid) {
      last_pid = t.pid;
      line(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", t.pid,
                       json_quote(t.process)));
      line(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
                       t.pid, t.pid));
    }
    line(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", t.pid, t.tid,
                     json_quote(t.thread)));
    line(fmt::format(R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})", t.pid,
                     t.tid, t.tid));
  }
  for (const auto& e : events_) {
    const auto& t = tracks_[e.track.index];
    std::string text = fmt::format(R"({{"ph":"{}","name":{},"pid":{},"tid":{},"ts":{})", e.phase, json_quote(e.name),
                                   t.pid, t.tid, json_number(e.ts_us));
    if (e.phase == 'X') text += fmt::format(R"(,"dur":{})", json_number(e.dur_us));
    if (e.phase == 'i') text += R"(,"s":"t")";
    if (!e.args.empty()) text += ",\"args\":" + e.args;
    text += '}';
    line(text);
  }
  out << "\n]}\n";
}

}  // namespace dtsim::sim
