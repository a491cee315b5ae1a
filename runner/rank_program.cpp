#include "runner/rank_program.hpp"

#include <array>
#include <cmath>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "algorithms/algorithm.hpp"
#include "algorithms/apply_gradient.hpp"
#include "algorithms/lr_schedule.hpp"
#include "algorithms/registry.hpp"
#include "comm/phase_timer.hpp"
#include "kernels/tensor_buffer.hpp"
#include "runner/divergence.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::runner {

namespace {

using nlohmann::json;

void dump_params(const std::filesystem::path& prefix, int rank, const std::vector<std::string>& names,
                 const std::vector<at::Tensor>& params) {
  json doc = {{"rank", rank}, {"params", json::object()}};
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto flat = params[i].to(at::kCPU, at::kDouble).contiguous();  // from any device
    doc["params"][names[i]] = std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  }
  const std::filesystem::path file = prefix.string() + fmt::format(".rank{}.json", rank);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file);
  out << doc.dump(1) << '\n';
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", file.string()));
}

// The workload's backward stages, for an algorithm that drives the backward pass
// (Algorithm::drives_backward): stage k runs backward_stage(k) under the
// "backward_pass" phase and advances the rank's clock by the stage's cost.
class StagedBackward final : public algorithms::BackwardPass {
 public:
  StagedBackward(comm::Communicator& comm, comm::PhaseTimer& timer, workloads::Workload& workload,
                 const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads)
      : comm_(comm), timer_(timer), workload_(workload), params_(params), grads_(grads),
        stages_(workload.backward_stages()) {}

  std::size_t stages() const override { return stages_.size(); }
  const std::vector<std::size_t>& stage_params(std::size_t k) const override { return stages_.at(k).params; }
  sim::Task<void> run_stage(std::size_t k) override {
    if (k != next_)
      throw std::logic_error(fmt::format("backward stage {} run out of order (expected stage {})", k, next_));
    ++next_;
    auto phase = timer_.phase("backward_pass");
    co_await comm_.compute(stages_[k].cost, [&] { workload_.backward_stage(k, params_, grads_); });
  }
  // A new step: every stage must run again, in order.
  void restart() { next_ = 0; }
  bool ran_all() const { return next_ == stages_.size(); }

 private:
  comm::Communicator& comm_;
  comm::PhaseTimer& timer_;
  workloads::Workload& workload_;
  const std::vector<at::Tensor>& params_;
  std::vector<at::Tensor>& grads_;
  std::vector<workloads::BackwardStage> stages_;
  std::size_t next_ = 0;
};

// Rank `rank`'s learning-rate schedule over its workload's shard; one the workload cannot
// follow (epochs counted without data) is a scenario error.
algorithms::LrSchedule lr_schedule_of(const Scenario& s, const net::Topology& topology,
                                      const workloads::Workload& workload, int rank) {
  const auto shard = workload.data_shard();
  // Only the graph scale-up needs the neighbourhood: the gossip graph costs a BFS per rank
  // (seconds for a complete graph of thousands of ranks), which no other run should pay.
  const bool graph_scaleup = s.algorithm.optimizer.lr_schedule.scaleup == algorithms::LrScaleup::graph;
  const algorithms::LrScheduleRank of_rank{
      .shard_samples = shard.samples,
      .batch_size = shard.batch,
      .neighborhood = graph_scaleup ? static_cast<std::int64_t>(topology.neighbors(rank).size()) + 1 : 1,
      .run_steps = s.steps};
  try {
    return algorithms::LrSchedule(s.algorithm.optimizer.lr, s.algorithm.optimizer.lr_schedule, of_rank);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError("/algorithm/lr_schedule", ErrorKind::inconsistent,
                        fmt::format("{} (workload {})", e.what(), s.workload.type));
  }
}

// Epochs done at step t (StepContext::epoch): t / ceil(shard / batch); NaN without data.
double epoch_at(const workloads::DataShard& shard, std::int64_t t) {
  if (shard.samples < 1 || shard.batch < 1) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(t) / static_cast<double>(algorithms::steps_per_epoch(shard.samples, shard.batch));
}

// Loss and accuracy of the rank-averaged model on the training and test sets, after the
// algorithm's before_evaluation: [train loss, train accuracy, test loss, test accuracy]
// (test NaN without a test set), on every rank. Rank 0 evaluates; the figures reach the
// others in one all-reduce. Without `evaluate_model` (the timing-only mode, whose model is
// not the algorithm's) only the communication happens and the figures are NaN.
sim::Task<std::array<double, 4>> evaluate_average(comm::Communicator& comm, algorithms::Algorithm& algorithm,
                                                  const workloads::Workload& workload, std::vector<at::Tensor>& params,
                                                  bool evaluate_model = true) {
  co_await algorithm.before_evaluation(comm, params);
  kernels::TensorBuffer model(params);
  co_await comm.all_reduce(model.buffer(), comm::ReduceOp::Average);
  at::Tensor figures = at::zeros({4}, at::kDouble);
  if (!evaluate_model) figures.fill_(std::numeric_limits<double>::quiet_NaN());
  if (comm.rank() == 0 && evaluate_model) {
    std::vector<at::Tensor> mean_params;
    for (const auto& p : params) mean_params.push_back(at::empty_like(p));
    model.unpack(mean_params);
    const auto train = workload.evaluate(mean_params);
    const auto test = workload.evaluate_test(mean_params);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    double* f = figures.data_ptr<double>();
    f[0] = train.loss;
    f[1] = train.accuracy;
    f[2] = test ? test->loss : nan;
    f[3] = test ? test->accuracy : nan;
  }
  co_await comm.all_reduce(figures, comm::ReduceOp::Sum);  // rank 0's figures plus zeros
  const double* f = figures.data_ptr<double>();
  const std::array<double, 4> out{f[0], f[1], f[2], f[3]};
  co_return out;
}

// One step's figures on one rank, as the loop records them.
struct StepRecord {
  double time_s = 0.0;
  double n_bits = 0.0;
  double wire_bytes = 0.0;
  double calls = 0.0;
  double loss = 0.0;       // the step's mini-batch loss (NaN without real math)
  double compute_s = 0.0;  // Communicator::compute_seconds spent in the step
  double lr = 0.0;
  std::vector<double> phase_s;  // seconds per phase, by the timer's phase index
};

// Everything a rank brings to the reduction that gives every rank the same RunResult.
struct RankRecords {
  std::vector<StepRecord> steps;
  std::vector<RunResult::EvalPoint> curve;  // the evaluations before the last step
  double state_bytes = 0.0;
  double end_time_s = 0.0;  // the clock after the last step, evaluations not counted
};

// The records as one fp64 vector for an all-reduce (Average), and the rank means back into
// a RunResult. The layout: the per-step series one after another (time, n_bits, wire
// bytes, calls, loss, compute, and lr when recorded), each phase's mean seconds per step
// (by index: every rank opens the same phases in the same order), the state bytes, the
// curve's clock times, the end time.
class RecordLayout {
 public:
  RecordLayout(std::size_t steps, bool with_lr, std::size_t phases) : steps_(steps), with_lr_(with_lr), phases_(phases) {}

  at::Tensor pack(const RankRecords& r) const {
    std::vector<double> flat;
    for (auto field : series(with_lr_))
      for (const auto& step : r.steps) flat.push_back(step.*field);
    for (std::size_t p = 0; p < phases_; ++p) {
      double sum = 0.0;
      for (const auto& step : r.steps) sum += p < step.phase_s.size() ? step.phase_s[p] : 0.0;
      flat.push_back(sum / static_cast<double>(steps_));
    }
    flat.push_back(r.state_bytes);
    for (const auto& point : r.curve) flat.push_back(point.time_s);
    flat.push_back(r.end_time_s);
    return at::tensor(flat, at::kDouble);
  }

  // Fills the result's series, phase means and state bytes, and the curve's times; returns the end time.
  double unpack(const at::Tensor& means, RunResult& result, std::vector<RunResult::EvalPoint>& curve) const {
    const double* v = means.data_ptr<double>();
    std::vector<double>* out[] = {&result.step_time_s, &result.n_bits, &result.wire_bytes, &result.calls,
                                  &result.loss, &result.compute_time_s, &result.lr};
    for (std::size_t k = 0; k < series(with_lr_).size(); ++k) {
      out[k]->assign(v, v + steps_);
      v += steps_;
    }
    result.phase_mean_s.assign(v, v + phases_);
    v += phases_;
    result.algorithm_state_bytes = *v++;
    for (auto& point : curve) point.time_s = *v++;
    return *v;
  }

 private:
  // In RunResult's order (unpack's `out`).
  static std::vector<double StepRecord::*> series(bool with_lr) {
    std::vector<double StepRecord::*> s{&StepRecord::time_s, &StepRecord::n_bits,   &StepRecord::wire_bytes,
                                        &StepRecord::calls,  &StepRecord::loss,     &StepRecord::compute_s};
    if (with_lr) s.push_back(&StepRecord::lr);
    return s;
  }

  std::size_t steps_;
  bool with_lr_;
  std::size_t phases_;
};

// One rank's state through the run: its workload, algorithm, parameters and clocks.
class RankState {
 public:
  RankState(comm::Communicator& comm, const RankJob& job)
      : comm_(comm), job_(job), s_(job.scenario), rank_(comm.rank()),
        workload_(workloads::make_workload(s_.workload, job.data, s_.seed, rank_, s_.ranks)),
        algorithm_(make_rank_algorithm()),
        lr_schedule_(lr_schedule_of(s_, job.topology, *workload_, rank_)),
        params_(workload_->initial_parameters()),
        timer_(comm),
        backward_(comm, timer_, *workload_, params_, grads_) {
    for (const auto& p : params_) grads_.push_back(at::zeros_like(p));
    if (job.trace) timer_.record_to(job.trace, job.trace->track(fmt::format("rank {}", rank_), "phases"));
    timer_.notify(job.recorder);
  }

  sim::Task<void> run(RunResult& result) {
    co_await algorithm_->start(comm_, params_);
    RankRecords records;
    for (std::int64_t t = 1; t <= s_.steps; ++t) {
      records.steps.push_back(co_await train_step(t));
      report_progress(t);
      if (s_.eval_every > 0 && t % s_.eval_every == 0 && t < s_.steps) records.curve.push_back(co_await evaluate_at(t));
    }
    co_await algorithm_->finish(comm_);  // joins communication still in flight (CHOCO's overlap)
    mark(comm::TraceMark::End);
    records.end_time_s = comm_.now() - evaluating_s_;
    records.state_bytes = static_cast<double>(algorithm_->state_bytes());
    if (job_.options.dump_params_prefix)
      dump_params(*job_.options.dump_params_prefix, rank_, workload_->parameter_names(), params_);
    co_await reduce(std::move(records), result);
  }

 private:
  // The reference's parameter groups: no weight decay on "bn" tensors.
  std::unique_ptr<algorithms::Algorithm> make_rank_algorithm() const {
    auto spec = s_.algorithm;
    spec.optimizer.weight_decay_mask = algorithms::weight_decay_mask(workload_->parameter_names());
    spec.parameter_names = workload_->parameter_names();
    return algorithms::make_algorithm(spec, job_.topology, rank_);
  }

  // A workload without real math (shape_models.hpp) still runs and costs its passes; its
  // losses and evaluations are NaN (null), and no divergence is judged.
  bool evaluates_model() const { return job_.evaluate && workload_->computes_loss(); }

  void mark(comm::TraceMark m, std::int64_t value = 0) {
    if (job_.recorder) job_.recorder->mark(m, value);
  }

  // Step t (from 1): forward, backward (unless the algorithm drives it), the algorithm's
  // step, and what the step took.
  sim::Task<StepRecord> train_step(std::int64_t t) {
    StepRecord record;
    mark(comm::TraceMark::StepBegin);
    const double start = comm_.now();
    const auto traffic_before = comm_.traffic();
    const double compute_before = comm_.compute_seconds();
    {
      auto phase = timer_.phase("forward_pass");
      co_await comm_.compute(workload_->forward_cost(), [&] { record.loss = workload_->forward(params_); });
    }
    const bool staged = algorithm_->drives_backward();
    if (!staged) {
      auto phase = timer_.phase("backward_pass");
      co_await comm_.compute(workload_->backward_cost(), [&] { workload_->backward(params_, grads_); });
    }
    record.lr = lr_schedule_.at(t);
    algorithms::StepContext ctx{comm_, timer_, params_, grads_, t, record.lr};
    ctx.epoch = epoch_at(workload_->data_shard(), t);
    if (staged) {
      backward_.restart();
      ctx.backward = &backward_;
    }
    record.n_bits = static_cast<double>(co_await algorithm_->step(ctx));
    if (staged && !backward_.ran_all())
      throw std::logic_error(fmt::format("{} did not run every backward stage in step {}", s_.algorithm.name, t));
    record.time_s = comm_.now() - start;
    // Right after the clock is read: a recorded step spans the measured one.
    mark(comm::TraceMark::StepEnd, static_cast<std::int64_t>(record.n_bits));
    record.compute_s = comm_.compute_seconds() - compute_before;
    record.wire_bytes = static_cast<double>(comm_.traffic().wire_bytes - traffic_before.wire_bytes);
    record.calls = static_cast<double>(comm_.traffic().calls - traffic_before.calls);
    record.phase_s = timer_.take_step();
    co_return record;
  }

  void report_progress(std::int64_t t) const {
    if (job_.options.progress && rank_ == 0)
      job_.options.progress({job_.evaluate ? "" : "rank 0's kernels", t, s_.steps, comm_.now()});
  }

  // The evaluation after step t; its clock is the step's end, earlier evaluations not counted.
  sim::Task<RunResult::EvalPoint> evaluate_at(std::int64_t t) {
    mark(comm::TraceMark::EvalBegin);
    const double at_step_end = comm_.now();
    const auto f = co_await evaluate_average(comm_, *algorithm_, *workload_, params_, evaluates_model());
    const RunResult::EvalPoint point{t, at_step_end - evaluating_s_, f[0], f[1], f[2], f[3]};
    evaluating_s_ += comm_.now() - at_step_end;
    mark(comm::TraceMark::EvalEnd);
    co_return point;
  }

  // Averages the records over ranks (one fp64 all-reduce), the model (its consensus
  // distance) and evaluates the averaged model: every rank ends with the same result.
  sim::Task<void> reduce(RankRecords records, RunResult& result) {
    const bool records_lr = !s_.algorithm.optimizer.lr_schedule.is_default();
    const RecordLayout layout(records.steps.size(), records_lr, timer_.names().size());
    at::Tensor summary = layout.pack(records);
    co_await comm_.all_reduce(summary, comm::ReduceOp::Average);

    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::array<double, 4> final_figures{nan, nan, nan, nan};
    double consensus_distance = nan;
    // The timing-only representative's model is not the algorithm's, and its
    // communication after TraceMark::End is not replayed: nothing to average.
    if (job_.evaluate) {
      kernels::TensorBuffer model(params_);
      at::Tensor mean_model = model.buffer().clone();
      co_await comm_.all_reduce(mean_model, comm::ReduceOp::Average);
      at::Tensor distance = at::full({1}, (model.buffer() - mean_model).pow(2).sum().item<double>(), at::kDouble);
      co_await comm_.all_reduce(distance, comm::ReduceOp::Average);
      consensus_distance = distance.item<double>();
      final_figures = co_await evaluate_average(comm_, *algorithm_, *workload_, params_, evaluates_model());
    }

    result.scenario = s_;
    result.backend = comm_.backend();
    result.phase_names = timer_.names();
    auto curve = std::move(records.curve);
    const double end_time = layout.unpack(summary, result, curve);
    curve.push_back({s_.steps, end_time, final_figures[0], final_figures[1], final_figures[2], final_figures[3]});
    result.eval = std::move(curve);
    result.final_loss = final_figures[0];
    result.final_accuracy = final_figures[1];
    result.final_test_loss = final_figures[2];
    result.final_test_accuracy = final_figures[3];
    result.consensus_distance = consensus_distance;
    if (!workload_->computes_loss())
      result.no_loss_reason = fmt::format("workload {} has no real math (a shape-only model)", s_.workload.type);
    else if (job_.evaluate)
      result.diverged_at_step = diverged_at_step(result.loss, result.final_loss, result.consensus_distance);
  }

  comm::Communicator& comm_;
  const RankJob& job_;
  const Scenario& s_;
  const int rank_;
  std::unique_ptr<workloads::Workload> workload_;
  std::unique_ptr<algorithms::Algorithm> algorithm_;
  algorithms::LrSchedule lr_schedule_;
  std::vector<at::Tensor> params_, grads_;
  comm::PhaseTimer timer_;
  StagedBackward backward_;
  double evaluating_s_ = 0.0;  // clock time spent in evaluations so far
};

}  // namespace

void check_epoch_counting(const Scenario& s, const net::Topology& topology,
                       const std::shared_ptr<const workloads::WorkloadData>& data) {
  std::unique_ptr<workloads::Workload> built;  // rank 0's workload, built once if a check needs it
  auto workload = [&]() -> const workloads::Workload& {
    if (!built) built = workloads::make_workload(s.workload, data, s.seed, 0, s.ranks);
    return *built;
  };
  const auto* entry = algorithms::find_algorithm(s.algorithm.name);
  if (entry && entry->check_parameters) entry->check_parameters(s.algorithm, workload().parameter_names());
  const std::string epoch_field = entry && entry->epoch_schedule_field ? entry->epoch_schedule_field(s.algorithm) : "";
  if (s.algorithm.optimizer.lr_schedule.is_default() && epoch_field.empty()) return;
  if (!epoch_field.empty() && !(workload().data_shard().samples > 0 && workload().data_shard().batch > 0))
    throw ScenarioError("/algorithm/" + epoch_field, ErrorKind::inconsistent,
                        fmt::format("counts epochs, and workload {} has no data to count them in", s.workload.type));
  lr_schedule_of(s, topology, workload(), 0);
}

sim::Task<void> rank_program(comm::Communicator& comm, RankJob job, RunResult& result) {
  RankState state(comm, job);
  co_await state.run(result);
}

}  // namespace dtsim::runner
