#include "runner/run.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "comm/emulated.hpp"
#include "comm/live_backend.hpp"
#include "comm/phase_timer.hpp"
#include "comm/recording.hpp"
#include "comm/representative.hpp"
#include "comm/trace_replay.hpp"
#include "kernels/tensor_buffer.hpp"
#include "network_models/collective_reuse.hpp"
#include "network_models/network.hpp"
#include "network_models/network_model.hpp"
#include "network_models/topology.hpp"
#include "network_models/transport.hpp"
#include "network_models/topology_spec.hpp"
#include "runner/divergence.hpp"
#include "runner/percentile.hpp"
#include "runner/rank_program.hpp"
#include "runner/resource_estimate.hpp"
#include "runner/version.hpp"
#include "workloads/workload_registry.hpp"
#include "sim/engine.hpp"
#include "sim/trace_writer.hpp"
#include "sim/task.hpp"
#include "workloads/workload_spec.hpp"

namespace dtsim::runner {

namespace {

using nlohmann::json;

// The workload's data, once per process; a missing or malformed data file is bad input.
std::shared_ptr<const workloads::WorkloadData> load_data(const Scenario& s) {
  try {
    return workloads::load_workload_data(s.workload, s.seed);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(workloads::workload_data_path(s.workload), ErrorKind::bad_file, e.what());
  }
}

// Writes `trace` to `file` atomically (through a temporary file).
void write_trace(const sim::TraceWriter& trace, const std::filesystem::path& file) {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  const auto tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    trace.write(out);
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp));
  }
  std::filesystem::rename(tmp, file);
}

std::filesystem::path trace_file_of(const std::filesystem::path& dir, int rank) {
  return dir / fmt::format("rank{}.trace", rank);
}

// Writes each trace to "<dir>/rank<r>.trace", atomically (through a temporary file).
void write_op_traces(const std::filesystem::path& dir, const std::vector<comm::OpTrace>& traces) {
  std::filesystem::create_directories(dir);
  for (const auto& t : traces) {
    const auto file = trace_file_of(dir, t.rank);
    const auto tmp = file.string() + ".tmp";
    const auto bytes = comm::to_bytes(t);
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp));
    }
    std::filesystem::rename(tmp, file);
  }
}

// Where a run's traces go: the caller's list, or a local one when only files are asked for.
std::vector<comm::OpTrace>* trace_sink(const RunOptions& options, std::vector<comm::OpTrace>& local) {
  if (options.record_traces) return options.record_traces;
  return options.record_trace_dir ? &local : nullptr;
}

// Reports rank 0's replay to RunOptions::progress: every step opens "forward_pass" first.
class ReplayProgress final : public comm::PhaseTimer::Listener {
 public:
  ReplayProgress(const RunOptions& options, const comm::Communicator& comm, std::int64_t steps)
      : options_(options), comm_(comm), steps_(steps) {}
  void phase_begin(std::size_t, const std::string& name) override {
    if (name != "forward_pass") return;
    if (begun_ > 0) options_.progress({"replay", begun_, steps_, comm_.now()});
    ++begun_;
  }
  void phase_end(std::size_t) override {}

 private:
  const RunOptions& options_;
  const comm::Communicator& comm_;
  std::int64_t steps_;
  std::int64_t begun_ = 0;
};

sim::Task<void> replay_rank(comm::Communicator& comm, const comm::OpTrace& trace, std::vector<int> neighbours,
                            comm::PhaseTimer& timer, comm::ReplayRecord& out) {
  out = co_await comm::replay_trace(comm, trace, std::move(neighbours), timer);
}

// Mean over ranks of element t of each rank's series, summed in rank order as the
// emulated all-reduce does, so a replay's means equal a full run's bit for bit.
std::vector<double> rank_mean(const std::vector<comm::ReplayRecord>& records,
                              std::vector<double> comm::ReplayRecord::*series) {
  std::vector<double> mean = records.front().*series;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto& other = records[r].*series;
    if (other.size() != mean.size())
      throw config::InputError(fmt::format("replay: rank {} recorded {} steps or evaluations, rank 0 {}", r,
                                              other.size(), mean.size()));
    for (std::size_t t = 0; t < mean.size(); ++t) mean[t] += other[t];
  }
  for (double& m : mean) m /= static_cast<double>(records.size());
  return mean;
}

// One attempt's emulated world, the same for a run and a replay: an engine on the
// scenario's clock, its network (with the run's collective reuse), every rank's
// communicator under `timing`, and the timeline when a trace file is asked for.
struct EmulatedSession {
  sim::Engine engine;
  std::shared_ptr<net::Network> network;
  comm::EmulatedWorld world;
  std::unique_ptr<sim::TraceWriter> trace;

  EmulatedSession(const Scenario& s, net::Topology topology, comm::ComputeTiming timing, const RunOptions& options,
                  const std::shared_ptr<net::CollectiveReuse>& reuse)
      : engine(s.time_grid()),
        network(std::make_shared<net::Network>(engine, std::move(topology), s.network, reuse)),
        world(engine, network, std::move(timing)) {
    if (options.trace_file) {
      trace = std::make_unique<sim::TraceWriter>();
      network->transport().record_to(trace.get());
    }
  }

  // Runs every spawned rank to the end, writes the timeline, and stamps the result.
  void run(const RunOptions& options, RunResult& result) {
    engine.run();
    if (trace) write_trace(*trace, *options.trace_file);
    result.mode = "emulated";
    result.event_trace_hash = engine.trace_hash();
  }
};

// The replays' phase means per step, averaged over ranks by phase name (a replayed rank
// opens its phases as its trace says, in an order of its own).
void mean_phases_by_name(const std::vector<std::unique_ptr<comm::PhaseTimer>>& timers,
                         const std::vector<comm::ReplayRecord>& records, RunResult& result) {
  result.phase_names = timers.front()->names();
  result.phase_mean_s.assign(result.phase_names.size(), 0.0);
  const double steps = static_cast<double>(result.step_time_s.size());
  for (std::size_t r = 0; r < records.size(); ++r) {
    const auto& names = timers[r]->names();
    for (std::size_t q = 0; q < names.size(); ++q) {
      auto it = std::find(result.phase_names.begin(), result.phase_names.end(), names[q]);
      if (it == result.phase_names.end()) {
        result.phase_names.push_back(names[q]);
        result.phase_mean_s.push_back(0.0);
        it = result.phase_names.end() - 1;
      }
      double sum = 0.0;
      for (const auto& step : records[r].phase_s) sum += q < step.size() ? step[q] : 0.0;
      result.phase_mean_s[static_cast<std::size_t>(it - result.phase_names.begin())] += sum / steps;
    }
  }
  for (double& p : result.phase_mean_s) p /= static_cast<double>(records.size());
}

// Rank r replays *traces[r] on the emulated network of `s`, compute taking the recorded
// seconds (times the scenario's slowdown when `slow` is set); `result`'s timing figures
// become the rank means of what the replays measured, as rank_program averages them.
void replay_attempt(const Scenario& s, const net::Topology& topology, const std::vector<const comm::OpTrace*>& traces,
                    bool slow, const RunOptions& options, RunResult& result,
                    const std::shared_ptr<net::CollectiveReuse>& reuse) {
  comm::ComputeTiming replay_timing;
  replay_timing.model = comm::replay_compute_model();
  if (slow) replay_timing.slowdown = s.compute.slowdown;
  EmulatedSession session(s, topology, std::move(replay_timing), options, reuse);
  auto& trace = session.trace;
  std::vector<comm::ReplayRecord> records(static_cast<std::size_t>(s.ranks));
  std::vector<std::unique_ptr<comm::PhaseTimer>> timers;
  std::optional<ReplayProgress> progress;
  for (int r = 0; r < s.ranks; ++r) {
    auto& comm = session.world.communicator(r);
    timers.push_back(std::make_unique<comm::PhaseTimer>(comm));
    if (r == 0 && options.progress) timers.back()->notify(&progress.emplace(options, comm, s.steps));
    if (trace) timers.back()->record_to(trace.get(), trace->track(fmt::format("rank {}", r), "phases"));
    session.engine.spawn(replay_rank(comm, *traces.at(static_cast<std::size_t>(r)), topology.neighbors(r), *timers.back(),
                             records[r]),
                 fmt::format("rank {}", r));
  }
  session.run(options, result);

  const double n = static_cast<double>(s.ranks);
  result.backend = "emulated";
  result.step_time_s = rank_mean(records, &comm::ReplayRecord::step_time_s);
  result.compute_time_s = rank_mean(records, &comm::ReplayRecord::compute_time_s);
  result.wire_bytes = rank_mean(records, &comm::ReplayRecord::wire_bytes);
  result.calls = rank_mean(records, &comm::ReplayRecord::calls);
  result.n_bits = rank_mean(records, &comm::ReplayRecord::n_bits);
  const auto eval_times = rank_mean(records, &comm::ReplayRecord::eval_time_s);
  if (result.eval.size() != eval_times.size() + 1) {  // a fresh result: the steps evaluated after, no figures
    const double nan = std::numeric_limits<double>::quiet_NaN();
    result.eval.assign(eval_times.size() + 1, {0, 0.0, nan, nan, nan, nan});
    for (std::size_t i = 0; i < eval_times.size(); ++i)
      result.eval[i].step = static_cast<std::int64_t>(i + 1) * s.eval_every;
    result.eval.back().step = s.steps;
  }
  for (std::size_t i = 0; i < eval_times.size(); ++i) result.eval[i].time_s = eval_times[i];
  double end = 0.0;
  for (const auto& rec : records) end += rec.end_time_s;
  result.eval.back().time_s = end / n;
  mean_phases_by_name(timers, records, result);
}

// Collective reuse for one run's attempts: on unless the scenario turns it off or a
// trace file must show every message.
std::shared_ptr<net::CollectiveReuse> new_reuse(const Scenario& s, const RunOptions& options) {
  return std::make_shared<net::CollectiveReuse>(s.network.reuse_collectives && !options.trace_file);
}

// Whether reuse was on (new_reuse folded the scenario's switch and a trace file into
// reuse.enabled(); closed-form models have no scheduled collectives), and its counts.
RunResult::Reuse reuse_figures(const Scenario& s, const net::CollectiveReuse& reuse) {
  RunResult::Reuse r;
  r.enabled = reuse.enabled() && !net::network_model(s.network.model).closed_form_collectives;
  r.stats = reuse.stats();
  return r;
}

void replay_on_network(const Scenario& s, const net::Topology& topology, const std::vector<const comm::OpTrace*>& traces,
                       bool slow, const RunOptions& options, RunResult& result) {
  auto reuse = new_reuse(s, options);
  net::run_with_reuse(*reuse, [&] { replay_attempt(s, topology, traces, slow, options, result, reuse); });
  result.reuse = reuse_figures(s, *reuse);
}

// The timing-only mode: rank 0 runs rank_program alone on a RepresentativeCommunicator
// (real kernels, every rank assumed to hold its data) recording an OpTrace; then every
// rank replays that trace with size-only tensors on the emulated network.
RunResult run_timing_only(const Scenario& s, const RunOptions& options) {
  if (options.dump_params_prefix)
    throw config::InputError("timing-only mode keeps no per-rank parameters to dump (drop --dump-params)");
  if (options.record_traces || options.record_trace_dir)
    throw config::InputError("timing-only mode replays one rank's trace; record the traces of a full run");
  constexpr int representative = 0;
  const auto topology = net::make_topology(s.topology, s.ranks, s.network.nominal);
  RunResult result;
  comm::OpTrace op_trace;
  {
    comm::RepresentativeCommunicator recorder(representative, s.ranks, topology.neighbors(representative), s.compute);
    const auto data = load_data(s);
    check_epoch_counting(s, topology, data);
    sim::run_blocking(rank_program(
        recorder, {.scenario = s, .topology = topology, .data = data, .options = options, .recorder = &recorder, .evaluate = false},
        result));
    op_trace = recorder.trace();
  }
  // Messages to neighbours map onto rank r's neighbours slot by slot, which stands for
  // rank r's own messages only when it has as many neighbours as the representative.
  const bool gossips = std::any_of(op_trace.ops.begin(), op_trace.ops.end(), [](const comm::TracedOp& op) {
    return op.kind == comm::TracedOp::Kind::Exchange || op.kind == comm::TracedOp::Kind::Send ||
           op.kind == comm::TracedOp::Kind::Recv;
  });
  const auto degree = topology.neighbors(representative).size();
  for (int r = 0; gossips && r < s.ranks; ++r)
    if (topology.neighbors(r).size() != degree)
      throw ScenarioError("/timing_only", ErrorKind::inconsistent, fmt::format("rank {} has {} gossip neighbours and rank {} has {}: one rank "
                                                      "cannot stand for all on this topology",
                                                      r, topology.neighbors(r).size(), representative, degree));

  const std::vector<const comm::OpTrace*> traces(static_cast<std::size_t>(s.ranks), &op_trace);
  replay_on_network(s, topology, traces, /*slow=*/true, options, result);
  result.timing_only = true;
  result.representative_rank = representative;
  // The representative's model trained against mirrored data: not the algorithm's.
  std::fill(result.loss.begin(), result.loss.end(), std::numeric_limits<double>::quiet_NaN());
  result.diverged_at_step = 0;
  result.consensus_distance = std::numeric_limits<double>::quiet_NaN();
  result.no_loss_reason = fmt::format("timing-only run (rank {}'s kernels replayed on every rank)", representative);
  return result;
}

// What a live rank measured before its run failed: per step (each starts with its first
// phase), the step time (steps that ended) and every phase's seconds, from its timeline.
json partial_record(const std::string& error, const Scenario& s, const comm::LiveEnv& env,
                    const comm::Communicator& comm, const sim::TraceWriter& timeline) {
  std::ostringstream text;
  timeline.write(text);
  const json events = json::parse(text.str())["traceEvents"];
  json phases = json::object();
  std::vector<double> starts;
  std::string first;
  for (const auto& ev : events) {
    if (ev["ph"] != "X") continue;
    const std::string name = ev["name"];
    if (first.empty()) first = name;
    if (name == first) starts.push_back(ev["ts"].get<double>() * 1e-6);
    auto& series = phases[name];
    while (series.size() < starts.size()) series.push_back(0.0);
    series[starts.size() - 1] = series[starts.size() - 1].get<double>() + ev["dur"].get<double>() * 1e-6;
  }
  std::vector<double> step_time;
  for (std::size_t t = 0; t + 1 < starts.size(); ++t) step_time.push_back(starts[t + 1] - starts[t]);
  return {{"dtsim_partial_version", 1},
          {"mode", "live"},
          {"backend", comm.backend()},
          {"rank", env.rank},
          {"error", error},
          {"scenario", s.to_json()},
          {"steps_started", starts.size()},
          {"wire_bytes_so_far", comm.traffic().wire_bytes},
          {"calls_so_far", comm.traffic().calls},
          {"per_step", {{"time_s", step_time}, {"phases_s", phases}}}};
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

double RunResult::simulated_time_s() const { return eval.empty() ? 0.0 : eval.back().time_s; }
double RunResult::mean_step_time_s() const { return mean(step_time_s); }
double RunResult::mean_n_bits() const { return mean(n_bits); }
double RunResult::mean_wire_bytes() const { return mean(wire_bytes); }
double RunResult::mean_calls() const { return mean(calls); }

namespace {

// max over steps of amount[t] / step_time_s[t]; steps of no time count as none.
double peak_rate(const std::vector<double>& amount, const std::vector<double>& step_time_s) {
  double peak = 0.0;
  for (std::size_t t = 0; t < amount.size() && t < step_time_s.size(); ++t)
    if (step_time_s[t] > 0.0) peak = std::max(peak, amount[t] / step_time_s[t]);
  return peak;
}

}  // namespace

double RunResult::peak_n_bits_per_s() const { return peak_rate(n_bits, step_time_s); }
double RunResult::peak_wire_bytes_per_s() const { return peak_rate(wire_bytes, step_time_s); }
double RunResult::mean_compute_time_s() const { return mean(compute_time_s); }

static RunResult emulated_attempt(const Scenario& s, const RunOptions& options, const std::shared_ptr<net::CollectiveReuse>& reuse) {
  EmulatedSession session(s, net::make_topology(s.topology, s.ranks, s.network.nominal), s.compute, options, reuse);
  const auto& topology = session.network->topology();
  auto data = load_data(s);
  check_epoch_counting(s, topology, data);
  std::vector<RunResult> results(s.ranks);
  std::vector<comm::OpTrace> local_traces;
  auto* traces = trace_sink(options, local_traces);
  std::vector<std::unique_ptr<comm::RecordingCommunicator>> recorders;
  for (int r = 0; r < s.ranks; ++r) {
    comm::Communicator* comm = &session.world.communicator(r);
    comm::RecordingCommunicator* recorder = nullptr;
    if (traces) {
      recorders.push_back(std::make_unique<comm::RecordingCommunicator>(*comm, topology.neighbors(r)));
      comm = recorder = recorders.back().get();
    }
    session.engine.spawn(rank_program(*comm,
                                      {.scenario = s, .topology = topology, .data = data, .options = options,
                                       .trace = session.trace.get(), .recorder = recorder},
                                      results[r]),
                         fmt::format("rank {}", r));
  }
  session.run(options, results[0]);
  if (traces) {
    traces->clear();
    for (const auto& recorder : recorders) traces->push_back(recorder->trace());
    if (options.record_trace_dir) write_op_traces(*options.record_trace_dir, *traces);
  }
  return results[0];
}

RunResult run_emulated(const Scenario& s, const RunOptions& options) {
  check_resources(s, RunKind::Emulated);  // before anything large is allocated
  if (s.timing_only) return run_timing_only(s, options);
  auto reuse = new_reuse(s, options);
  auto result = net::run_with_reuse(*reuse, [&] { return emulated_attempt(s, options, reuse); });
  result.reuse = reuse_figures(s, *reuse);
  return result;
}

std::vector<comm::OpTrace> read_traces(const std::filesystem::path& dir, int ranks) {
  std::vector<comm::OpTrace> traces;
  for (int r = 0; r < ranks; ++r) {
    const auto file = trace_file_of(dir, r);
    std::ifstream in(file, std::ios::binary);
    if (!in) throw config::InputError(fmt::format("{}: cannot read rank {}'s trace", file.string(), r));
    const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    try {
      traces.push_back(comm::op_trace_from_bytes(bytes));
    } catch (const config::InputError& e) {
      throw config::InputError(fmt::format("{}: {}", file.string(), e.what()));
    }
  }
  return traces;
}

RunResult replay_traces(const Scenario& s, const std::vector<comm::OpTrace>& traces, const RunOptions& options) {
  if (traces.size() != static_cast<std::size_t>(s.ranks))
    throw config::InputError(fmt::format("replay: {} traces for {} ranks", traces.size(), s.ranks));
  for (std::size_t r = 0; r < traces.size(); ++r)
    if (traces[r].rank != static_cast<int>(r) || traces[r].ranks != s.ranks)
      throw config::InputError(fmt::format("replay: trace #{} is rank {} of {}, not rank {} of {}", r,
                                              traces[r].rank, traces[r].ranks, r, s.ranks));
  const auto topology = net::make_topology(s.topology, s.ranks, s.network.nominal);
  std::vector<const comm::OpTrace*> pointers;
  for (const auto& t : traces) pointers.push_back(&t);
  RunResult result;
  result.scenario = s;
  result.replayed_from = "recorded traces";
  replay_on_network(s, topology, pointers, /*slow=*/false, options, result);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  result.loss.assign(result.step_time_s.size(), nan);
  result.final_loss = result.final_accuracy = result.final_test_loss = result.final_test_accuracy = nan;
  result.consensus_distance = result.algorithm_state_bytes = nan;
  result.no_loss_reason = "replay of recorded traces (sizes, not data)";
  return result;
}

RunResult run_live(const Scenario& s, const comm::LiveEnv& env, const RunOptions& options) {
  if (s.timing_only)
    throw ScenarioError("/timing_only", ErrorKind::inconsistent, "applies to emulated runs (dtsim run); a live run runs and measures every rank");
  if (env.world_size != s.ranks)
    throw ScenarioError("/ranks", ErrorKind::environment, fmt::format("the scenario has {} ranks but WORLD_SIZE is {}", s.ranks, env.world_size));
  check_resources(s, RunKind::Live);  // this process's rank, before anything large is allocated
  auto topology = net::make_topology(s.topology, s.ranks, s.network.nominal);
  auto comm = comm::live_backend(options.live_backend).make(env, s.network);
  auto data = load_data(s);
  check_epoch_counting(s, topology, data);
  RunResult result;
  sim::TraceWriter timeline;  // this rank's phases, kept for the partial record of a failed run
  std::vector<comm::OpTrace> local_traces;
  auto* traces = trace_sink(options, local_traces);
  std::unique_ptr<comm::RecordingCommunicator> recorder;
  if (traces) recorder = std::make_unique<comm::RecordingCommunicator>(*comm, topology.neighbors(env.rank));
  try {
    comm::Communicator& rank_comm = recorder ? *recorder : *comm;
    sim::run_blocking(rank_program(rank_comm,
                                   {.scenario = s, .topology = topology, .data = data, .options = options,
                                    .trace = &timeline, .recorder = recorder.get()},
                                   result));
    if (traces) {
      *traces = {recorder->trace()};
      if (options.record_trace_dir) write_op_traces(*options.record_trace_dir, *traces);
    }
  } catch (const std::exception& e) {
    throw LiveRunFailed(e.what(), partial_record(e.what(), s, env, *comm, timeline));
  }
  result.mode = "live";
  return result;
}

namespace {

json or_null(double x) { return std::isnan(x) ? json(nullptr) : json(x); }

}  // namespace

json RunResult::eval_json() const {
  json curve = json::array();
  for (const auto& p : eval)
    curve.push_back({{"step", p.step},
                     {"time_s", p.time_s},
                     {"train_loss", or_null(p.train_loss)},
                     {"train_accuracy", or_null(p.train_accuracy)},
                     {"test_loss", or_null(p.test_loss)},
                     {"test_accuracy", or_null(p.test_accuracy)}});
  return curve;
}

json RunResult::phases_json(double step) const {
  json phases = json::array();
  for (std::size_t i = 0; i < phase_names.size(); ++i)
    phases.push_back({{"name", phase_names[i]},
                      {"mean_s", phase_mean_s[i]},
                      {"share", step > 0 ? phase_mean_s[i] / step : 0.0}});
  return phases;
}

json RunResult::per_step_json() const {
  json losses = json::array();  // NaN (timing-only) as null
  for (double l : loss) losses.push_back(or_null(l));
  json per_step = {{"time_s", step_time_s},
                   {"compute_time_s", compute_time_s},
                   {"n_bits", n_bits},
                   {"wire_bytes", wire_bytes},
                   {"calls", calls},
                   {"loss", losses}};
  if (!lr.empty()) per_step["lr"] = lr;
  return per_step;
}

json RunResult::to_json() const {
  // Every key written here is described in runner/result_fields.cpp (docs/result_file.md);
  // runs_test checks that the two agree.
  const double step = mean_step_time_s();
  return {{"dtsim_result_version", kResultVersion},
          {"dtsim_version", kDtsimVersion},
          {"mode", mode},
          {"backend", backend},
          {"timing_only", timing_only ? json{{"representative_rank", representative_rank}} : json(false)},
          {"replayed_from", replayed_from.empty() ? json(nullptr) : json(replayed_from)},
          {"no_loss_reason", no_loss_reason.empty() ? json(nullptr) : json(no_loss_reason)},
          {"scenario", scenario.to_json()},
          {"phases", phases_json(step)},
          {"simulated_time_s", simulated_time_s()},
          {"step_mean_s", step},
          {"step_percentiles_s",
           {{"p50", nearest_rank_percentile(step_time_s, 50)},
            {"p90", nearest_rank_percentile(step_time_s, 90)},
            {"p99", nearest_rank_percentile(step_time_s, 99)},
            {"max", nearest_rank_percentile(step_time_s, 100)}}},
          {"n_bits_per_step", mean_n_bits()},
          {"wire_bytes_per_step", mean_wire_bytes()},
          {"peak_n_bits_per_s", peak_n_bits_per_s()},
          {"peak_wire_bytes_per_s", peak_wire_bytes_per_s()},
          {"calls_per_step", mean_calls()},
          {"compute_s_per_step", mean_compute_time_s()},
          {"exposed_comm_s_per_step", std::max(0.0, step - mean_compute_time_s())},
          {"final",
           {{"train_loss", or_null(final_loss)},
            {"train_accuracy", or_null(final_accuracy)},
            {"test_loss", or_null(final_test_loss)},
            {"test_accuracy", or_null(final_test_accuracy)},
            {"consensus_distance", or_null(consensus_distance)}}},
          {"eval", eval_json()},
          {"algorithm_state_bytes", algorithm_state_bytes},
          {"diverged_at_step", diverged_at_step > 0 ? json(diverged_at_step) : json(nullptr)},
          {"event_trace_hash", fmt::format("{:016x}", event_trace_hash)},
          {"collective_reuse",
           mode == "emulated"
               ? json{{"enabled", reuse.enabled},
                      {"collectives", reuse.stats.collectives},
                      {"replayed", reuse.stats.replayed},
                      {"recorded", reuse.stats.recorded},
                      {"restarts", reuse.stats.restarts},
                      {"hit_rate", reuse.stats.hit_rate()}}
               : json(nullptr)},
          {"per_step", per_step_json()}};
}

}  // namespace dtsim::runner
