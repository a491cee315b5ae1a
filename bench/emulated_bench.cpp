// dtsim_emulated_bench: how many emulated ranks of a model fit on one device, and how many
// emulated steps per second it runs (all ranks of a step: the emulator's throughput, not
// the simulated step time).
//
//   dtsim_emulated_bench SCENARIO [--device cpu|cuda] [--steps N] [--json FILE]
//
// Runs the scenario emulated (`dtsim run`'s code path, scenario's compute timing) with the
// device and step count overridden when given, and reports:
//   wall_s, steps_per_s (= steps / wall), rank_steps_per_s (= ranks x steps / wall);
//   peak memory: on the CPU the process's peak resident set (VmHWM) against its resident
//   set before the run (LibTorch's own pages), on CUDA LibTorch's peak allocated bytes
//   against those allocated before the run;
//   bytes_per_rank = (peak - before) / ranks: an upper bound, since the process-wide data
//   (a dataset, the shape models' value pool) and the engine are charged to the ranks too;
//   ranks_that_fit = (capacity - before) / bytes_per_rank, capacity being the machine's
//   memory (MemTotal) or the device's: an estimate by linear extrapolation, and a lower
//   bound for the same reason. Run at the rank count you care about to check it.
//
// scenarios/emulated_resnet20_choco64.json is the reference case (CHOCO-SGD, top-1 %, on
// ResNet-20's shapes, 64 ranks); figures in bench/results/emulated-device.md.
#include <CLI/CLI.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

#include "runner/run.hpp"
#include "runner/scenario.hpp"

namespace {

using namespace dtsim;
using nlohmann::json;

// A "Name:   123 kB" line of a /proc file, in bytes (0 when absent).
double proc_kb(const char* file, const std::string& name) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + ":", 0) == 0) return std::stod(line.substr(name.size() + 1)) * 1024.0;
  return 0.0;
}

struct Memory {
  std::string what;       // how it was measured
  double before = 0.0;    // bytes in use before the run
  double peak = 0.0;      // at the peak of the run
  double capacity = 0.0;  // of the machine or device
};

// On the CPU the kernel's counters; VmHWM is the process's peak since it started, which
// the run's peak dominates (LibTorch's pages are resident before the run too).
Memory cpu_memory_before() {
  return {"peak resident set (VmHWM)", proc_kb("/proc/self/status", "VmRSS"), 0.0,
          proc_kb("/proc/meminfo", "MemTotal")};
}

void cpu_memory_after(Memory& m) { m.peak = proc_kb("/proc/self/status", "VmHWM"); }

#if DTSIM_TORCH_CUDA
// On a GPU LibTorch's caching allocator: the peak of bytes handed to tensors, which is
// what the ranks need (the allocator's cache and the CUDA context come on top).
Memory cuda_memory_before() {
  // LibTorch sets up CUDA and its allocator lazily, at the first CUDA tensor; the
  // allocator's statistics exist only after that.
  (void)at::empty({1}, at::TensorOptions().device(at::kCUDA));
  const int device = c10::cuda::current_device();
  c10::cuda::CUDACachingAllocator::resetPeakStats(device);
  std::size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  return {"LibTorch's peak allocated bytes", static_cast<double>(stats.allocated_bytes[0].current), 0.0,
          static_cast<double>(total)};
}

void cuda_memory_after(Memory& m) {
  c10::cuda::device_synchronize();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
  m.peak = static_cast<double>(stats.allocated_bytes[0].peak);
}
#endif

std::string gib(double bytes) { return fmt::format("{:.3f} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Emulated ranks per device and emulated steps per second for one scenario"};
  std::string scenario_file, device, json_file;
  std::int64_t steps = 0;
  app.add_option("scenario", scenario_file, "Scenario JSON file")->required();
  app.add_option("--device", device, "Override the scenario's device")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--steps", steps, "Override the scenario's step count")->check(CLI::PositiveNumber);
  app.add_option("--json", json_file, "Also write the figures as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    std::ifstream in(scenario_file);
    if (!in) throw std::invalid_argument("cannot read " + scenario_file);
    json doc = json::parse(in);
    runner::resolve_file_fields(doc, std::filesystem::path(scenario_file).parent_path());
    if (!device.empty()) doc["device"] = device;
    if (steps > 0) doc["steps"] = steps;
    const auto scenario = runner::parse_scenario(doc);
    const bool cuda = scenario.workload.device.is_cuda();

#if DTSIM_TORCH_CUDA
    Memory memory = cuda ? cuda_memory_before() : cpu_memory_before();
#else
    Memory memory = cpu_memory_before();
#endif
    const auto start = std::chrono::steady_clock::now();
    const auto result = runner::run_emulated(scenario);
#if DTSIM_TORCH_CUDA
    if (cuda) cuda_memory_after(memory);
#endif
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!cuda) cpu_memory_after(memory);

    const double ranks = scenario.ranks, n_steps = static_cast<double>(scenario.steps);
    const double per_rank = (memory.peak - memory.before) / ranks;
    const double fit = per_rank > 0 ? (memory.capacity - memory.before) / per_rank : 0.0;
    fmt::print("{}: {} ranks x {} steps of {} ({}) on {}\n", scenario.name, scenario.ranks, scenario.steps,
               scenario.algorithm.name, scenario.workload.type, cuda ? "cuda" : "cpu");
    fmt::print("  wall {:.3f} s   {:.3f} steps/s   {:.1f} rank-steps/s   simulated step {:.3g} s\n", wall,
               n_steps / wall, ranks * n_steps / wall, result.mean_step_time_s());
    fmt::print("  memory ({}): {} before, {} peak, {} per rank; capacity {} -> about {:.0f} ranks fit\n", memory.what,
               gib(memory.before), gib(memory.peak), gib(per_rank), gib(memory.capacity), fit);
    if (!json_file.empty()) {
      const json out = {{"benchmark", "emulated_device"},
                        {"scenario", scenario.name},
                        {"device", cuda ? "cuda" : "cpu"},
                        {"ranks", scenario.ranks},
                        {"steps", scenario.steps},
                        {"algorithm", scenario.algorithm.name},
                        {"workload", scenario.workload.type},
                        {"wall_s", wall},
                        {"steps_per_s", n_steps / wall},
                        {"rank_steps_per_s", ranks * n_steps / wall},
                        {"simulated_step_s", result.mean_step_time_s()},
                        {"memory_measure", memory.what},
                        {"memory_before_bytes", memory.before},
                        {"memory_peak_bytes", memory.peak},
                        {"bytes_per_rank", per_rank},
                        {"capacity_bytes", memory.capacity},
                        {"ranks_that_fit_estimate", fit},
                        {"final_loss", result.final_loss}};
      std::ofstream(json_file) << out.dump(2) << '\n';
    }
    return 0;
  } catch (const runner::ScenarioError& e) {
    fmt::print(stderr, "dtsim_emulated_bench: error: {}: {}\n", scenario_file, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    fmt::print(stderr, "dtsim_emulated_bench: {}\n", what);
    return 1;
  }
}
