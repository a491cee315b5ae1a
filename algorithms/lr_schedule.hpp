// algorithms::LrSchedule: the learning rate of every step, from the scenario's
// "algorithm": {"lr_schedule": {...}}, computed as the ChocoSGD reference code does
// (dl_code/pcode/create_scheduler.py; convex_decay as convex_code/base_logistic.py).
//
// Progress: step t counts from 1 (StepContext::local_index) and sits at epoch e = t / S,
// S = ceil(shard / batch) steps per epoch (1 for full batch). The reference advances its
// counter before it reads the lr, so step t = M S, the last of epoch M, already has
// epoch M's lr.
//
// Peak lr: L = k lr, with k = 1 ("lr_scaleup": {"factor": "none"}, the default) or
// k = |N(i) u {i}| batch / base_batch_size ("factor": "graph": the rank's neighbourhood
// in the topology, self included: 3 on a ring, n on a complete graph).
//
//   constant      m(t) = L
//   multistep     m(t) = L gamma^(number of milestones M with e >= M)
//   cosine        m(t) = lr_min + (L - lr_min) (1 + cos(pi p)) / 2,  p = (t - W) / (T - W)
//                 clamped to [0, 1]; T = total_epochs S, or the run's steps
//   convex_decay  m(t) = a / (t - 1 + b)  (t - 1: the convex code's iteration, from 0; the
//                 paper's lr = 0.1 / (lambda (t + d)) is a = 0.1 / lambda, b = d)
//   warmup_cosine the language-model default, in steps: linear warm-up over warmup_steps,
//                 then cosine to lr_min at total_steps (or the run's steps):
//                 lr_warmup_cosine.hpp (it takes no warmup_epochs)
//
// Warm-up (warmup_epochs E > 0, W = E S steps): lr_t = lr_0 + (m(W) - lr_0) t / W for
// t < W, then m(t). lr_0 = warmup_init_lr; its default is the unscaled lr with a graph
// scale-up (the reference warms up from lr to L) and 0 otherwise (lr_t = m(W) t / W, the
// common linear warm-up). Without warm-up, W = 0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"

namespace dtsim::algorithms {

enum class LrScheduleType { constant, multistep, cosine, convex_decay, warmup_cosine };
enum class LrScaleup { none, graph };

// The "lr_schedule" object, as the loader checked it. Epochs are fractional numbers.
struct LrScheduleSpec {
  LrScheduleType type = LrScheduleType::constant;
  double warmup_epochs = 0.0;              // E
  double warmup_init_lr = 0.0;             // lr_0 (the loader fills in its default)
  LrScaleup scaleup = LrScaleup::none;
  std::int64_t base_batch_size = 0;        // graph scale-up
  std::vector<double> milestones;          // multistep: epochs, strictly ascending
  double gamma = 0.1;                      // multistep
  double total_epochs = 0.0;               // cosine: 0 for the run's steps
  double lr_min = 0.0;                     // cosine, warmup_cosine
  std::int64_t warmup_steps = 0;           // warmup_cosine: W
  std::int64_t total_steps = 0;            // warmup_cosine: T, 0 for the run's steps (echoed as 0)
  double a = 0.0, b = 0.0;                 // convex_decay

  // Constant, no warm-up, no scale-up: every step runs at lr, as before schedules
  // existed; the scenario echo leaves the object out and runs record no per-step lr.
  bool is_default() const {
    return type == LrScheduleType::constant && warmup_epochs == 0.0 && scaleup == LrScaleup::none;
  }
  // Counts epochs (warm-up, milestones, cosine over total_epochs): needs the shard size.
  bool counts_epochs() const;
};

// The schedule types and the fields each reads besides "type", "warmup_epochs",
// "warmup_init_lr" and "lr_scaleup" (which every type reads), for the loader, its
// messages and the schema test.
struct LrScheduleTypeInfo {
  LrScheduleType type;
  std::string_view name;
  std::vector<std::string> fields;
  std::string_view description;  // one line, for dtsim list
};
const std::vector<LrScheduleTypeInfo>& lr_schedule_types();
const std::vector<std::string>& lr_schedule_common_fields();
std::string_view to_string(LrScheduleType type);

// "lr_schedule" in the algorithm object `a` (absent: the default); `lr` is the scenario's
// (warmup_init_lr's default). Errors are ScenarioErrors naming the field's JSON Pointer.
LrScheduleSpec parse_lr_schedule(config::ObjectReader& a, double lr);
// Every field the type reads, defaults filled in: parse_lr_schedule of it gives `s` again.
nlohmann::json lr_schedule_json(const LrScheduleSpec& s);

// What the schedule needs from the run, for one rank.
struct LrScheduleRank {
  std::int64_t shard_samples = 0;  // 0: the workload has no data (epochs cannot be counted)
  std::int64_t batch_size = 0;     // samples per step (the shard for full batch); 0: unknown
  std::int64_t neighborhood = 1;   // |N(i) u {i}|
  std::int64_t run_steps = 0;      // the scenario's steps
};

// ceil(shard_samples / batch_size): steps in one pass over the shard.
std::int64_t steps_per_epoch(std::int64_t shard_samples, std::int64_t batch_size);

class LrSchedule {
 public:
  // Throws std::invalid_argument when `rank` lacks what `spec` needs (a shard to count
  // epochs in, a batch size to scale by).
  LrSchedule(double lr, const LrScheduleSpec& spec, const LrScheduleRank& rank);

  // The lr of step t (from 1).
  double at(std::int64_t t) const;
  double peak() const { return peak_; }  // L
  double steps_per_epoch() const { return steps_per_epoch_; }

 private:
  double main_schedule(double t) const;  // m(t)

  LrScheduleSpec spec_;
  double peak_ = 0.0;
  double steps_per_epoch_ = 1.0;  // S (1 where no epochs are counted)
  double warmup_steps_ = 0.0;     // W
  double total_steps_ = 0.0;      // T (cosine)
};

}  // namespace dtsim::algorithms
