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
// Each type is a shape m(t) of its own, in lr_schedules/ (its settings, parse, echo and
// formula):
//   constant      m(t) = L
//   multistep     m(t) = L gamma^(number of milestones M with e >= M)
//   cosine        m(t) = lr_min + (L - lr_min) (1 + cos(pi p)) / 2,  p = (t - W) / (T - W)
//                 clamped to [0, 1]; T = total_epochs S, or the run's steps
//   convex_decay  m(t) = a / (t - 1 + b)  (t - 1: the convex code's iteration, from 0; the
//                 paper's lr = 0.1 / (lambda (t + d)) is a = 0.1 / lambda, b = d)
//   warmup_cosine the language-model default, in steps: linear warm-up over warmup_steps,
//                 then cosine to lr_min at total_steps (or the run's steps); it takes no
//                 warmup_epochs
//   wsd           warm-up, stable, decay, in steps: linear warm-up over warmup_steps, the
//                 peak, then the last decay_fraction of total_steps (or the run's steps) down
//                 to lr_min (linear, cosine or 1-sqrt); it takes no warmup_epochs
//
// Warm-up (warmup_epochs E > 0, W = E S steps): lr_t = lr_0 + (m(W) - lr_0) t / W for
// t < W, then m(t). lr_0 = warmup_init_lr; its default is the unscaled lr with a graph
// scale-up (the reference warms up from lr to L) and 0 otherwise (lr_t = m(W) t / W, the
// common linear warm-up). Without warm-up, W = 0.
//
// Adding a schedule type: lr_schedules/<type>.cpp with its entry (fields, parse, echo, the
// shape it makes) and, if it has fields, lr_schedules/<type>.hpp with its settings struct;
// one line in lr_schedule.cpp's table, one in algorithms/CMakeLists.txt, its fields'
// description lines in algorithm_docs.cpp, its tests. The loader, the echo, `dtsim list
// lr_schedules` and the generated schema read the entry.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/entry_settings.hpp"
#include "config/object_reader.hpp"

namespace dtsim::algorithms {

enum class LrScaleup { none, graph };

// The "lr_schedule" object, as the loader checked it: what every type reads, and the
// type's own settings struct (read with lr_schedule_settings<T>). Epochs are fractional.
struct LrScheduleSpec {
  std::string type = "constant";
  double warmup_epochs = 0.0;        // E
  double warmup_init_lr = 0.0;       // lr_0 (the loader fills in its default)
  LrScaleup scaleup = LrScaleup::none;
  std::int64_t base_batch_size = 0;  // graph scale-up
  std::any settings;                 // the type's settings struct; empty: its defaults

  // Constant, no warm-up, no scale-up: every step runs at lr, as before schedules
  // existed; the scenario echo leaves the object out and runs record no per-step lr.
  bool is_default() const { return type == "constant" && warmup_epochs == 0.0 && scaleup == LrScaleup::none; }
  // Counts epochs (the warm-up, or the type's own: milestones, cosine over total_epochs):
  // needs the shard size.
  bool counts_epochs() const;
};

// The type's settings struct stored in spec.settings, or its defaults when none is.
template <class Settings>
const Settings& lr_schedule_settings(const LrScheduleSpec& spec) {
  return config::entry_settings<Settings>(spec.settings);
}

// What a type's shape is made with, for one rank.
struct LrShapeContext {
  double peak = 0.0;             // L
  double steps_per_epoch = 1.0;  // S (1 where no epochs are counted)
  double warmup_steps = 0.0;     // W = E S
  std::int64_t run_steps = 0;    // the scenario's steps
};
// m(t) for step t (from 1).
using LrShape = std::function<double(double t)>;

struct LrScheduleEntry {
  std::string_view name;
  std::string_view description;  // one line, for dtsim list
  // The keys it reads besides "type" and the common fields, in the order its parse reads them.
  std::vector<std::string> fields;
  // Fields that make a valid object of this type whose echo holds every field: its
  // required ones, and those the echo leaves out at their default (for the tests).
  nlohmann::json example;
  // Whether it takes lr_scaleup (convex_decay sets its own lr and refuses one).
  bool scales = true;
  // Reads its own fields into spec.settings; `spec` has the common fields already (a
  // check across them names the field at fault). ScenarioErrors name JSON Pointers.
  void (*parse)(config::ObjectReader& o, LrScheduleSpec& spec);
  // Writes its fields back (parse of the result gives the same settings).
  void (*to_json)(const LrScheduleSpec& spec, nlohmann::json& out);
  // Whether its own shape counts epochs (the warm-up's are counted for every type).
  bool (*counts_epochs)(const LrScheduleSpec& spec);
  // Its m(t); std::invalid_argument when the run cannot hold it (a cosine over fewer steps
  // than the warm-up).
  LrShape (*make)(const LrScheduleSpec& spec, const LrShapeContext& context);
};

// In table order: constant, multistep, cosine, convex_decay, warmup_cosine, wsd.
std::span<const LrScheduleEntry* const> lr_schedule_entries();
// The entry called `name`; std::invalid_argument naming the known ones otherwise.
const LrScheduleEntry& lr_schedule_entry(std::string_view name);
std::vector<std::string> lr_schedule_names();
// The fields every type reads besides "type": warmup_epochs, warmup_init_lr, lr_scaleup.
const std::vector<std::string>& lr_schedule_common_fields();

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
  // epochs in, a batch size to scale by) or the run cannot hold the shape.
  LrSchedule(double lr, const LrScheduleSpec& spec, const LrScheduleRank& rank);

  // The lr of step t (from 1).
  double at(std::int64_t t) const;
  double peak() const { return context_.peak; }  // L
  double steps_per_epoch() const { return context_.steps_per_epoch; }

 private:
  double warmup_epochs_ = 0.0;  // E
  double warmup_init_lr_ = 0.0;
  LrShapeContext context_;
  LrShape shape_;  // m(t)
};

}  // namespace dtsim::algorithms
