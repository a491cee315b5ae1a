#include "runner/run.hpp"

#include <fstream>
#include <numeric>

#include <fmt/format.h>

#include "algorithms/algorithm.hpp"
#include "comm/emulated.hpp"
#include "comm/gloo.hpp"
#include "comm/phase_timer.hpp"
#include "kernels/tensor_buffer.hpp"
#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"
#include "sim/engine.hpp"
#include "sim/trace_writer.hpp"
#include "sim/task.hpp"
#include "workloads/logistic_regression.hpp"

namespace dtsim::runner {

namespace {

using nlohmann::json;

void dump_params(const std::filesystem::path& prefix, int rank, const std::vector<std::string>& names,
                 const std::vector<at::Tensor>& params) {
  json doc = {{"rank", rank}, {"params", json::object()}};
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto flat = params[i].to(at::kDouble).contiguous();
    doc["params"][names[i]] = std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  }
  const std::filesystem::path file = prefix.string() + fmt::format(".rank{}.json", rank);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file);
  out << doc.dump(1) << '\n';
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", file.string()));
}

// One rank's whole job: `steps` training steps, then the reductions that make every
// rank's RunResult identical (per-step records and the averaged model).
sim::Task<void> rank_program(comm::Communicator& comm, const Scenario& s, const net::Topology& topology,
                             std::shared_ptr<const workloads::SyntheticDataset> data, const RunOptions& options,
                             RunResult& result, sim::TraceWriter* trace = nullptr) {
  const int rank = comm.rank();
  auto workload = workloads::make_logistic_regression(s.workload, data, s.seed, rank, s.ranks);
  auto algorithm = algorithms::make_algorithm(s.algorithm, topology, rank);
  auto params = workload->initial_parameters();
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(at::zeros_like(p));

  comm::PhaseTimer timer(comm);
  if (trace) timer.record_to(trace, trace->track(fmt::format("rank {}", rank), "phases"));
  const auto steps = static_cast<std::size_t>(s.steps);
  std::vector<double> step_time, n_bits, wire, calls, loss;
  std::vector<std::vector<double>> phase_steps;
  for (std::size_t t = 0; t < steps; ++t) {
    const double start = comm.now();
    const auto traffic_before = comm.traffic();
    {
      auto phase = timer.phase("forward_pass");
      co_await comm.compute(workload->forward_cost(), [&] { loss.push_back(workload->forward(params)); });
    }
    {
      auto phase = timer.phase("backward_pass");
      co_await comm.compute(workload->backward_cost(), [&] { workload->backward(params, grads); });
    }
    algorithms::StepContext ctx{comm, timer, params, grads, static_cast<std::int64_t>(t) + 1};
    n_bits.push_back(static_cast<double>(co_await algorithm->step(ctx)));
    step_time.push_back(comm.now() - start);
    wire.push_back(static_cast<double>(comm.traffic().wire_bytes - traffic_before.wire_bytes));
    calls.push_back(static_cast<double>(comm.traffic().calls - traffic_before.calls));
    phase_steps.push_back(timer.take_step());
  }
  co_await algorithm->finish(comm);  // joins communication still in flight (CHOCO's overlap)
  if (options.dump_params_prefix) dump_params(*options.dump_params_prefix, rank, workload->parameter_names(), params);

  // Average the records over ranks: one fp64 all-reduce of everything.
  const auto& names = timer.names();
  std::vector<double> record;
  for (const auto* series : {&step_time, &n_bits, &wire, &calls, &loss}) record.insert(record.end(), series->begin(), series->end());
  for (std::size_t p = 0; p < names.size(); ++p) {
    double sum = 0.0;
    for (const auto& step : phase_steps) sum += p < step.size() ? step[p] : 0.0;
    record.push_back(sum / static_cast<double>(steps));
  }
  record.push_back(static_cast<double>(algorithm->state_bytes()));
  at::Tensor summary = at::tensor(record, at::kDouble);
  co_await comm.all_reduce(summary, comm::ReduceOp::Average);

  kernels::TensorBuffer model(params);
  at::Tensor mean_model = model.buffer().clone();
  co_await comm.all_reduce(mean_model, comm::ReduceOp::Average);
  at::Tensor distance = at::full({1}, (model.buffer() - mean_model).pow(2).sum().item<double>(), at::kDouble);
  co_await comm.all_reduce(distance, comm::ReduceOp::Average);

  const double* v = summary.data_ptr<double>();
  auto take = [&](std::vector<double>& out) {
    out.assign(v, v + steps);
    v += steps;
  };
  result.scenario = s;
  result.backend = comm.backend();
  take(result.step_time_s);
  take(result.n_bits);
  take(result.wire_bytes);
  take(result.calls);
  take(result.loss);
  result.phase_names = names;
  result.phase_mean_s.assign(v, v + names.size());
  result.algorithm_state_bytes = v[names.size()];
  for (std::size_t t = 0; t < result.loss.size() && result.diverged_at_step == 0; ++t)
    if (!(result.loss[t] <= kDivergedLoss)) result.diverged_at_step = static_cast<std::int64_t>(t) + 1;
  model.buffer().copy_(mean_model);
  model.unpack(params);
  const auto eval = workload->evaluate(params);
  result.final_loss = eval.loss;
  result.final_accuracy = eval.accuracy;
  result.consensus_distance = distance.item<double>();
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

double RunResult::mean_step_time_s() const { return mean(step_time_s); }
double RunResult::mean_n_bits() const { return mean(n_bits); }
double RunResult::mean_wire_bytes() const { return mean(wire_bytes); }
double RunResult::mean_calls() const { return mean(calls); }

RunResult run_emulated(const Scenario& s, const RunOptions& options) {
  sim::Engine engine;
  auto network =
      std::make_shared<net::Network>(engine, net::make_topology(s.topology, s.ranks, s.network.nominal), s.network);
  const auto& topology = network->topology();
  comm::EmulatedWorld world(engine, network, s.compute);
  auto data = workloads::SyntheticDataset::generate(s.workload, s.seed);
  std::unique_ptr<sim::TraceWriter> trace;
  if (options.trace_file) {
    trace = std::make_unique<sim::TraceWriter>();
    network->transport().record_to(trace.get());
  }
  std::vector<RunResult> results(s.ranks);
  for (int r = 0; r < s.ranks; ++r)
    engine.spawn(rank_program(world.communicator(r), s, topology, data, options, results[r], trace.get()),
                 fmt::format("rank {}", r));
  engine.run();
  results[0].mode = "emulated";
  results[0].event_trace_hash = engine.trace_hash();
  if (trace) {
    if (options.trace_file->has_parent_path()) std::filesystem::create_directories(options.trace_file->parent_path());
    const auto tmp = options.trace_file->string() + ".tmp";
    {
      std::ofstream out(tmp);
      trace->write(out);
      if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp));
    }
    std::filesystem::rename(tmp, *options.trace_file);
  }
  return results[0];
}

RunResult run_live(const Scenario& s, const comm::LiveEnv& env, const RunOptions& options) {
  if (env.world_size != s.ranks)
    throw ScenarioError("/ranks", fmt::format("the scenario has {} ranks but WORLD_SIZE is {}", s.ranks, env.world_size));
  auto topology = net::make_topology(s.topology, s.ranks, s.network.nominal);
  auto comm = comm::make_gloo_communicator(env, s.network);
  auto data = workloads::SyntheticDataset::generate(s.workload, s.seed);
  RunResult result;
  sim::run_blocking(rank_program(*comm, s, topology, data, options, result));
  result.mode = "live";
  return result;
}

json RunResult::to_json() const {
  json phases = json::array();
  const double step = mean_step_time_s();
  for (std::size_t i = 0; i < phase_names.size(); ++i)
    phases.push_back({{"name", phase_names[i]},
                      {"mean_s", phase_mean_s[i]},
                      {"share", step > 0 ? phase_mean_s[i] / step : 0.0}});
  return {{"dtsim_result_version", 1},
          {"mode", mode},
          {"backend", backend},
          {"scenario", scenario.to_json()},
          {"phases", phases},
          {"step_mean_s", step},
          {"n_bits_per_step", mean_n_bits()},
          {"wire_bytes_per_step", mean_wire_bytes()},
          {"calls_per_step", mean_calls()},
          {"final", {{"loss", final_loss}, {"accuracy", final_accuracy}, {"consensus_distance", consensus_distance}}},
          {"algorithm_state_bytes", algorithm_state_bytes},
          {"diverged_at_step", diverged_at_step > 0 ? json(diverged_at_step) : json(nullptr)},
          {"event_trace_hash", fmt::format("{:016x}", event_trace_hash)},
          {"per_step",
           {{"time_s", step_time_s}, {"n_bits", n_bits}, {"wire_bytes", wire_bytes}, {"calls", calls}, {"loss", loss}}}};
}

}  // namespace dtsim::runner
