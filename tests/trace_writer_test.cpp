// sim::TraceWriter: the Chrome trace-event JSON that ui.perfetto.dev loads. Each case
// writes a trace, parses it back with an independent JSON parser (nlohmann::json), and
// checks what a viewer relies on: named tracks as pid/tid pairs, spans with start and
// duration in microseconds, and strings that survive any bytes a name may contain.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "sim/trace_writer.hpp"

namespace dtsim::sim {
namespace {

using nlohmann::json;

json written(const TraceWriter& trace) {
  std::ostringstream out;
  trace.write(out);
  return json::parse(out.str());  // throws (failing the test) on invalid JSON
}

// The events with phase `ph`, in file order.
std::vector<json> with_phase(const json& doc, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == ph) out.push_back(e);
  return out;
}

// Metadata event `name` for (pid, tid), or null.
json metadata(const json& doc, const std::string& name, int pid, int tid) {
  for (const auto& e : with_phase(doc, "M"))
    if (e.at("name") == name && e.at("pid") == pid && e.at("tid") == tid) return e;
  return nullptr;
}

// Two ranks with a compute and a comm thread each, plus a link track: one pid per
// process name, tids numbered within a process, every track named by metadata, and
// asking for a track again returns the same one.
TEST(TraceWriter, NamesEachTrackByProcessAndThread) {
  TraceWriter trace;
  const auto r0_compute = trace.track("rank 0", "compute");
  const auto r1_compute = trace.track("rank 1", "compute");
  const auto r0_comm = trace.track("rank 0", "comm");
  const auto link = trace.track("links", "0->1");
  EXPECT_EQ(trace.track("rank 0", "comm"), r0_comm);
  EXPECT_FALSE(r0_compute == r1_compute);
  trace.complete(r0_compute, "forward", 0.0, 1e-3);
  trace.complete(r0_comm, "all_reduce", 1e-3, 2e-3);
  trace.complete(r1_compute, "forward", 0.0, 1.5e-3);
  trace.complete(link, "msg", 1e-3, 1.2e-3);

  const json doc = written(trace);
  const auto spans = with_phase(doc, "X");
  ASSERT_EQ(spans.size(), 4u);
  const std::pair<int, int> r0c{spans[0].at("pid"), spans[0].at("tid")};
  const std::pair<int, int> r0m{spans[1].at("pid"), spans[1].at("tid")};
  const std::pair<int, int> r1c{spans[2].at("pid"), spans[2].at("tid")};
  const std::pair<int, int> l{spans[3].at("pid"), spans[3].at("tid")};
  EXPECT_EQ(r0c.first, r0m.first) << "same process, same pid";
  EXPECT_NE(r0c.second, r0m.second) << "different threads, different tids";
  EXPECT_EQ(std::set<int>({r0c.first, r1c.first, l.first}).size(), 3u) << "three processes";

  EXPECT_EQ(metadata(doc, "process_name", r0c.first, 0).at("args").at("name"), "rank 0");
  EXPECT_EQ(metadata(doc, "process_name", r1c.first, 0).at("args").at("name"), "rank 1");
  EXPECT_EQ(metadata(doc, "process_name", l.first, 0).at("args").at("name"), "links");
  EXPECT_EQ(metadata(doc, "thread_name", r0c.first, r0c.second).at("args").at("name"), "compute");
  EXPECT_EQ(metadata(doc, "thread_name", r0m.first, r0m.second).at("args").at("name"), "comm");
  EXPECT_EQ(metadata(doc, "thread_name", l.first, l.second).at("args").at("name"), "0->1");
  // Four tracks, three processes: 4 thread names + 3 process names, each with a sort index.
  EXPECT_EQ(with_phase(doc, "M").size(), 2u * (4u + 3u));
}

// Seconds in, microseconds out: ts is the start, dur the length, and a short span late
// in a long run keeps its duration to the precision of the difference.
TEST(TraceWriter, WritesTimesInMicroseconds) {
  TraceWriter trace;
  const auto t = trace.track("rank 0", "compute");
  trace.complete(t, "step", 1.5, 2.25);
  trace.complete(t, "tiny", 1000.0, 1000.0 + 3e-9);
  trace.complete(t, "empty", 0.0, 0.0);
  trace.instant(t, "barrier", 4e-6);
  trace.counter(t, "bytes in flight", 2e-6, 4096.0);

  const json doc = written(trace);
  const auto spans = with_phase(doc, "X");
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_DOUBLE_EQ(spans[0].at("ts").get<double>(), 1.5e6);
  EXPECT_DOUBLE_EQ(spans[0].at("dur").get<double>(), 0.75e6);
  EXPECT_DOUBLE_EQ(spans[1].at("ts").get<double>(), 1e9);
  // 3 ns is 0.003 us; the difference 1000+3e-9 - 1000 is exact to about 1e-13 s.
  EXPECT_NEAR(spans[1].at("dur").get<double>(), 3e-3, 1e-6);
  EXPECT_EQ(spans[2].at("dur").get<double>(), 0.0);

  const auto instants = with_phase(doc, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_DOUBLE_EQ(instants[0].at("ts").get<double>(), 4.0);
  EXPECT_EQ(instants[0].at("s"), "t") << "thread-scoped, drawn on its own track";
  EXPECT_FALSE(instants[0].contains("dur"));

  const auto counters = with_phase(doc, "C");
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0].at("name"), "bytes in flight");
  EXPECT_DOUBLE_EQ(counters[0].at("ts").get<double>(), 2.0);
  EXPECT_EQ(counters[0].at("args").at("value").get<double>(), 4096.0);
}

// Names and argument strings may contain anything: quotes, backslashes, newlines and
// other control characters, multi-byte UTF-8, and bytes that are not UTF-8 at all. The
// output must stay valid JSON and give back the same text (bad bytes as U+FFFD).
TEST(TraceWriter, EscapesStrings) {
  const std::string nasty = "say \"hi\"\\ \n\t\r\b\f \x01\x1f end";
  const std::string unicode = "\xCE\xB1\xE2\x86\x92\xF0\x9F\x9A\x80";  // alpha, arrow, rocket
  TraceWriter trace;
  const auto t = trace.track(nasty, unicode);
  trace.complete(t, nasty, 0.0, 1.0, {{"note", nasty}, {"unicode", unicode}, {"bad", "a\xFF" "b\xC3"}});

  const json doc = written(trace);
  const auto span = with_phase(doc, "X").at(0);
  EXPECT_EQ(span.at("name"), nasty);
  EXPECT_EQ(span.at("args").at("note"), nasty);
  EXPECT_EQ(span.at("args").at("unicode"), unicode);
  EXPECT_EQ(span.at("args").at("bad"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(metadata(doc, "process_name", span.at("pid"), 0).at("args").at("name"), nasty);
  EXPECT_EQ(metadata(doc, "thread_name", span.at("pid"), span.at("tid")).at("args").at("name"), unicode);

  // Overlong forms and UTF-16 surrogates encoded in UTF-8 are not valid UTF-8 either.
  EXPECT_EQ(json_quote("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(json_quote("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(json_quote("\x7f"), "\"\x7f\"") << "DEL needs no escape";
}

// Argument values keep their JSON types; numbers that JSON cannot hold become null.
TEST(TraceWriter, WritesTypedArguments) {
  TraceWriter trace;
  const auto t = trace.track("rank 0", "comm");
  const std::uint64_t big = std::numeric_limits<std::uint64_t>::max();
  trace.complete(t, "send", 0.0, 1.0,
                 {{"bytes", big},
                  {"peer", -3},
                  {"ratio", 0.1},
                  {"eager", true},
                  {"inf", std::numeric_limits<double>::infinity()},
                  {"nan", std::numeric_limits<double>::quiet_NaN()}});
  const auto args = with_phase(written(trace), "X").at(0).at("args");
  EXPECT_EQ(args.at("bytes").get<std::uint64_t>(), big);
  EXPECT_EQ(args.at("peer").get<int>(), -3);
  EXPECT_EQ(args.at("ratio").get<double>(), 0.1) << "shortest round-trip form";
  EXPECT_EQ(args.at("eager"), true);
  EXPECT_TRUE(args.at("inf").is_null());
  EXPECT_TRUE(args.at("nan").is_null());
}

// Events keep the order they were added in, and an empty trace is still a valid file.
TEST(TraceWriter, KeepsInsertionOrderAndWritesEmptyTraces) {
  EXPECT_TRUE(written(TraceWriter{}).at("traceEvents").empty());
  TraceWriter trace;
  const auto t = trace.track("p", "t");
  for (int i = 0; i < 5; ++i) trace.complete(t, std::to_string(4 - i), 4.0 - i, 5.0 - i);
  EXPECT_EQ(trace.events(), 5u);
  const auto spans = with_phase(written(trace), "X");
  ASSERT_EQ(spans.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(spans[i].at("name"), std::to_string(4 - i));
}

// A span that ends before it starts, a time that is not finite, or a track this writer
// never made is a bug in the caller, reported at once rather than written.
TEST(TraceWriter, RejectsBadEvents) {
  TraceWriter trace;
  const auto t = trace.track("p", "t");
  EXPECT_THROW(trace.complete(t, "backwards", 2.0, 1.0), std::invalid_argument);
  EXPECT_THROW(trace.instant(t, "nan", std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  EXPECT_THROW(trace.complete(t, "inf", 0.0, std::numeric_limits<double>::infinity()), std::invalid_argument);
  TraceWriter other;
  other.track("a", "b");
  const auto foreign = other.track("c", "d");
  EXPECT_THROW(trace.complete(foreign, "foreign", 0.0, 1.0), std::invalid_argument);
  EXPECT_EQ(trace.events(), 0u);
}

}  // namespace
}  // namespace dtsim::sim
