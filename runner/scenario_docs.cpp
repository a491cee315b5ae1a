#include "runner/scenario_docs.hpp"

namespace dtsim::runner {

std::span<const config::FieldDoc> scenario_docs() {
  static constexpr config::FieldDoc docs[] = {
    {"scenario", "", "One run of dtsim: ranks, steps, workload, algorithm, topology, network, compute. Unknown keys "
        "are errors. Cross-field rules the schema cannot state (checked by runner::parse_scenario): torus "
        "dims multiply to ranks; hypercube needs a power-of-two rank count; samples >= ranks; fat_tree "
        "large enough for the ranks; edges/bandwidth_trace/failures name existing nodes and cables; "
        "stragglers' rank < ranks; distopt threshold <= buffer_size / 2; ddp powersgd and parallel_sgd "
        "powersgd: start_powerSGD_iter > 1 with use_error_feedback or warm_start; the compressor kind is "
        "one the algorithm accepts; gpt: heads divide width, context fits a rank's shard of the text and "
        "its held-out part, vocab covers the data's tokens; lr_schedule milestones ascend, cosine "
        "total_epochs exceeds warmup_epochs, warmup_cosine total_steps exceeds warmup_steps and takes no "
        "warmup_epochs, convex_decay takes no lr_scaleup, and epochs need a workload with data (not the "
        "shape-only models). \"integer\" means an integer literal as the loader reads it: 1e9 or 4.0 is a "
        "number, not an integer, for dtsim (sweep::validate_scenario_schema agrees), while generic JSON "
        "Schema validators accept it."},
    {"scenario", "name", "label in tables"},
    {"scenario", "ranks", "number of workers"},
    {"scenario", "steps", "training steps per rank"},
    {"scenario", "seed", "seeds data, partition, mini-batch order, compressors and jitter"},
    {"scenario", "eval_every", "evaluate the rank-averaged model every this many steps (0: only after the last step)"},
    {"scenario", "timing_only", "emulated runs: rank 0 alone runs the algorithm's real kernels as if every rank held its data, "
        "and every rank replays its operations (sizes, compute times, waits) with size-only tensors on "
        "the simulated network; memory does not grow with the rank count. Reports step times, bits, wire "
        "bytes and calls; loss and accuracy are null (the model is not the algorithm's). Needs a topology "
        "where every rank has as many gossip neighbours as rank 0 when the algorithm gossips"},
    {"scenario", "time_resolution_s", "emulated runs: the simulated clock's tick, rounded down to a power of two (the default 1e-14 "
        "gives 2^-47 s, about 7.1 fs): every duration added to a time is rounded to whole ticks, so below "
        "2^53 ticks (64 s at the default) every time is exact and shifts exactly, and collective reuse "
        "replays across that whole span; 0: plain doubles (reuse per binade of simulated time). Otherwise "
        "1e-18 to 1e-9: durations round to whole ticks, so a coarser clock would round latencies away"},
    {"scenario", "workload", ""},
    {"scenario", "algorithm", ""},
    {"scenario", "topology", ""},
    {"scenario", "network", ""},
    {"scenario", "compute", ""},
    {"scenario", "device", "where every rank's tensors live: parameters, gradients, data and the algorithm's state (emulated "
        "runs hold all ranks on this one device). \"cuda\" is the current CUDA device; it needs a dtsim "
        "built against a CUDA LibTorch and a visible device, else the loader stops at /device saying "
        "which is missing. Random draws are made on the CPU and copied, so both devices start from the "
        "same numbers; with \"compute\": {\"timing\": \"measured\"} the measured time includes the "
        "device's work"},
  };
  return docs;
}

}  // namespace dtsim::runner
