// sim::TraceWriter: collects timeline events of a run and writes them as Chrome
// trace-event JSON, the format ui.perfetto.dev and chrome://tracing load.
//
// A track is a (process, thread) pair of names, e.g. ("rank 3", "compute") or
// ("links", "0->1"); each distinct process name becomes one pid and each thread name
// within it one tid, numbered in the order tracks are first asked for, and named by
// "M" (metadata) events. On a track go complete events (a named span, "ph":"X"),
// instants ("ph":"i") and counters ("ph":"C"). Times are given in simulated seconds and
// written in microseconds, the unit of the format.
//
// Only the standard library and fmt: strings are escaped here (quotes, backslashes,
// control characters), and bytes that are not valid UTF-8 become U+FFFD, so any name
// yields valid JSON.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtsim::sim {

// One "args" entry of an event: a key and a number, boolean or string value, rendered
// to JSON when made. Written as {"bytes", n} or {"peer", "rank 3"} in an args list.
class TraceArg {
 public:
  TraceArg(std::string key, std::string_view value);
  TraceArg(std::string key, const char* value) : TraceArg(std::move(key), std::string_view(value)) {}
  TraceArg(std::string key, const std::string& value) : TraceArg(std::move(key), std::string_view(value)) {}
  TraceArg(std::string key, bool value) : key_(std::move(key)), json_(value ? "true" : "false") {}
  TraceArg(std::string key, double value);
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  TraceArg(std::string key, I value) : key_(std::move(key)), json_(std::to_string(value)) {}

  const std::string& key() const noexcept { return key_; }
  const std::string& json() const noexcept { return json_; }

 private:
  std::string key_;
  std::string json_;
};

using TraceArgs = std::vector<TraceArg>;

class TraceWriter {
 public:
  // Index of a (process, thread) track; cheap to copy and compare.
  struct TrackId {
    std::size_t index;
    friend bool operator==(TrackId, TrackId) = default;
  };

  // The track named (process, thread), created on first use.
  TrackId track(const std::string& process, const std::string& thread);

  // A span [start_s, end_s] on `track`. Throws std::invalid_argument if a time is not
  // finite or end_s < start_s.
  void complete(TrackId track, std::string name, double start_s, double end_s, TraceArgs args = {});
  // A point in time on `track`.
  void instant(TrackId track, std::string name, double t_s, TraceArgs args = {});
  // The value of counter `name` from t_s on; drawn as a graph in the track's process.
  void counter(TrackId track, std::string name, double t_s, double value);

  std::size_t events() const noexcept { return events_.size(); }

  // The whole trace: metadata naming every track, then the events in the order they
  // were added. One event per line, so traces diff well.
  void write(std::ostream& out) const;

 private:
  struct Track {
    int pid;
    int tid;
    std::string process;
    std::string thread;
  };
  struct Event {
    char phase;  // 'X', 'i' or 'C'
    TrackId track;
    std::string name;
    double ts_us;
    double dur_us;       // 'X' only
    std::string args;    // rendered "args" object, or empty
  };
  void add(char phase, TrackId track, std::string name, double start_s, double end_s, std::string args);

  std::vector<Track> tracks_;
  std::map<std::pair<std::string, std::string>, std::size_t> track_index_;
  std::map<std::string, std::pair<int, int>> processes_;  // name -> (pid, threads so far)
  std::vector<Event> events_;
};

// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

}  // namespace dtsim::sim
