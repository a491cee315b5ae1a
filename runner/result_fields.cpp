#include "runner/result_fields.hpp"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "runner/divergence.hpp"

namespace dtsim::runner {

namespace {

// diverged_at_step's description states the factor.
static_assert(kDivergenceFactor == 10.0, "update /diverged_at_step's description");

// "Per rank" figures are one rank's, averaged over the ranks; "per step" ones are also
// averaged over the steps. Simulated seconds under emulation, wall-clock seconds live.
constexpr std::array kFields{
    ResultField{"/dtsim_result_version", "integer", "The layout of this file: 2 (version 1 named `final.train_loss` and `final.train_accuracy` `loss` and `accuracy`, and had no `simulated_time_s`, `step_percentiles_s`, `no_loss_reason` or `dtsim_version`)."},
    ResultField{"/dtsim_version", "string", "The dtsim that wrote the file (`dtsim --version`)."},
    ResultField{"/mode", "string", "`emulated` (all ranks in one process, simulated time) or `live` (one process per rank, measured time)."},
    ResultField{"/backend", "string", "`emulated`, or the live run's backend: `gloo` or `nccl`."},
    ResultField{"/timing_only", "false or object", "false, or for a timing-only run (rank 0's kernels, every rank replaying its operations with size-only tensors) an object with the rank that ran the kernels."},
    ResultField{"/timing_only/representative_rank", "integer", "The rank whose operations every rank replayed."},
    ResultField{"/replayed_from", "string or null", "A replay (`dtsim replay`): the directory of the recorded traces; null otherwise."},
    ResultField{"/no_loss_reason", "string or null", "Why the run has no loss or accuracy figures (they are null everywhere): a timing-only run, a replay, a workload without real math (the shape-only models); null when it has them."},
    ResultField{"/scenario", "object", "The scenario as run, every default filled in (scenarios/README.md describes its fields)."},
    ResultField{"/phases", "array", "The phases of a step in order of first use, as the terminal table shows them."},
    ResultField{"/phases/*/name", "string", "The phase: `forward_pass`, `backward_pass`, and the algorithm's own (e.g. `sync/apply_grad`)."},
    ResultField{"/phases/*/mean_s", "number", "Seconds per step in the phase, per rank."},
    ResultField{"/phases/*/share", "number", "The phase's fraction of the mean step time."},
    ResultField{"/simulated_time_s", "number", "Seconds from the start to the end of the last step, per rank (rank mean), the evaluations not counted: the whole run's time on the clock a time to target is read on."},
    ResultField{"/step_mean_s", "number", "Mean step time in seconds, per rank."},
    ResultField{"/step_percentiles_s", "object", "Percentiles of the per-step times (`per_step.time_s`), nearest rank."},
    ResultField{"/step_percentiles_s/p50", "number", "Median step time, seconds."},
    ResultField{"/step_percentiles_s/p90", "number", "90th percentile step time, seconds."},
    ResultField{"/step_percentiles_s/p99", "number", "99th percentile step time, seconds."},
    ResultField{"/step_percentiles_s/max", "number", "The longest step, seconds."},
    ResultField{"/n_bits_per_step", "number", "Bits a rank sends per step by the reference's convention (the compressor's payload: 32 per fp32 value, what the CHOCO-SGD line reports as n_bits)."},
    ResultField{"/wire_bytes_per_step", "number", "Bytes a rank puts on the wire per step, as the collectives' schedules move them (what the network model times)."},
    ResultField{"/peak_n_bits_per_s", "number", "Peak bandwidth by the reference's convention: the largest over steps of `per_step.n_bits` / `per_step.time_s` (rank means), the rate the busiest step sends at. An exchange overlapped with later steps (Streaming DiLoCo, CHOCO-SGD) is charged to the step that starts it, so this is the rate that hides it behind one step; a method that spreads its bits over more steps (Streaming DiLoCo's fragments) shows a lower peak at the same total."},
    ResultField{"/peak_wire_bytes_per_s", "number", "The same peak for the bytes on the wire: the largest `per_step.wire_bytes` / `per_step.time_s`."},
    ResultField{"/calls_per_step", "number", "Communication calls (collectives, exchanges, sends) per step, per rank."},
    ResultField{"/compute_s_per_step", "number", "Seconds per step a rank spends computing (forward, backward, optimizer and compression kernels): under emulation the compute timing's (the cost model by default: `scenario.compute`), not measured."},
    ResultField{"/exposed_comm_s_per_step", "number", "Step time minus compute time: communication not hidden behind compute, and waiting for other ranks."},
    ResultField{"/final", "object", "The rank-averaged model after the last step."},
    ResultField{"/final/train_loss", "number or null", "Its loss on the whole training set (all ranks' shards)."},
    ResultField{"/final/train_accuracy", "number or null", "Its accuracy on the whole training set, a fraction."},
    ResultField{"/final/test_loss", "number or null", "Its loss on the workload's held-out test set; null without one."},
    ResultField{"/final/test_accuracy", "number or null", "Its accuracy on the held-out test set, a fraction; null without one."},
    ResultField{"/final/consensus_distance", "number or null", "How far the ranks' models are apart: the mean over ranks i of ||x_i - x_bar||^2, x_bar the rank-averaged model (0 for algorithms that keep one model)."},
    ResultField{"/eval", "array", "The rank-averaged model evaluated every `scenario.eval_every` steps and after the last step."},
    ResultField{"/eval/*/step", "integer", "The step after which it was evaluated (1-based)."},
    ResultField{"/eval/*/time_s", "number", "The rank-mean clock at the end of that step, the evaluations before it not counted."},
    ResultField{"/eval/*/train_loss", "number or null", "Loss on the whole training set."},
    ResultField{"/eval/*/train_accuracy", "number or null", "Accuracy on the whole training set, a fraction."},
    ResultField{"/eval/*/test_loss", "number or null", "Loss on the held-out test set; null without one."},
    ResultField{"/eval/*/test_accuracy", "number or null", "Accuracy on the held-out test set, a fraction; null without one."},
    ResultField{"/algorithm_state_bytes", "number or null", "Bytes of model-sized state the algorithm keeps per rank besides the parameters and gradients (replicas, error memories, momenta), after the last step; null for a replay."},
    ResultField{"/diverged_at_step", "integer or null", "The step at which the run diverged, or null: the first step whose rank-mean training loss is not finite or more than 10 times the first step's, else the last step when the final model's loss is (or the consensus distance is not finite). The run still goes to the end."},
    ResultField{"/event_trace_hash", "string", "Emulated runs: a hash of the engine's fired events (time, order, kind), 16 hex digits, equal for two runs exactly when their event sequences are; all zeros for live runs."},
    ResultField{"/collective_reuse", "object or null", "Emulated runs: collective reuse (a repeated collective's times replayed instead of simulated again; the same times, fewer events); null for live runs."},
    ResultField{"/collective_reuse/enabled", "boolean", "Whether it was on (`network.reuse_collectives`, off with `--trace` and for closed-form models)."},
    ResultField{"/collective_reuse/collectives", "integer", "Scheduled collectives the run started."},
    ResultField{"/collective_reuse/replayed", "integer", "Of them, replayed from a recording."},
    ResultField{"/collective_reuse/recorded", "integer", "Of them, simulated and recorded for later replay."},
    ResultField{"/collective_reuse/restarts", "integer", "Times the run restarted without reuse after a replay met other traffic."},
    ResultField{"/collective_reuse/hit_rate", "number", "replayed / collectives."},
    ResultField{"/per_step", "object", "One value per step, each the mean over ranks."},
    ResultField{"/per_step/time_s", "array of numbers", "Step time, seconds."},
    ResultField{"/per_step/compute_time_s", "array of numbers", "Compute seconds in the step."},
    ResultField{"/per_step/n_bits", "array of numbers", "Bits sent in the step (reference convention)."},
    ResultField{"/per_step/wire_bytes", "array of numbers", "Bytes put on the wire in the step."},
    ResultField{"/per_step/calls", "array of numbers", "Communication calls in the step."},
    ResultField{"/per_step/loss", "array of numbers or nulls", "The training loss of the step's mini-batch, before the update (null without real math)."},
    ResultField{"/per_step/lr", "array of numbers", "The learning rate of the step; present only with an `algorithm.lr_schedule`."},
};

// Text in a Markdown table cell: a "|" would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::span<const ResultField> result_fields() { return kFields; }

std::string result_fields_markdown() {
  std::string out = "| field | type | what it is |\n|---|---|---|\n";
  for (const auto& f : kFields) out += fmt::format("| `{}` | {} | {} |\n", f.pointer, f.type, cell(f.description));
  return out;
}

}  // namespace dtsim::runner
