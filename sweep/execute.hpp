// Running a sweep into an output directory, resumably, and merging shards.
//
// OUT/sweep.json          the manifest (Sweep::manifest)
// OUT/points/<id>.json    one finished point: {"id", "index", "label", "values", "axes",
//                         "result": RunResult::to_json()}, written atomically (temporary
//                         file, then rename) as soon as the point finishes
// OUT/table.{md,csv,json} the table of every point present (sweep/table.hpp)
//
// A point whose file exists (and parses, with its id) is skipped, so rerunning an
// interrupted sweep runs only what is missing. Point files hold no wall-clock data: the
// same point gives the same file wherever and whenever it ran.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/sweep.hpp"

namespace dtsim::sweep {

struct ExecuteOptions {
  std::filesystem::path out_dir;
  int jobs = 0;                // points run at once, each in a child process; 0: one per core
  int shard = 0, shards = 1;   // run the points whose index % shards == shard
  bool progress_bar = false;   // a redrawn bar (terminal) instead of one line per point
  std::uint64_t point_memory_bytes = 0;  // each point's memory limit (child_process.hpp); 0: none
};

struct ExecuteOutcome {
  std::size_t total = 0, selected = 0, ran = 0, skipped = 0;
  std::vector<std::string> failures;  // one line per failed point
  nlohmann::json table;               // of every point present in OUT
};

// Runs the sweep's selected points with runner::run_emulated, each in a child process of
// its own on one thread (at::set_num_threads(1)), `jobs` at a time, then writes the
// tables. A point's file depends on its scenario only, not on --jobs, sharding or load.
// Progress goes to `log`.
ExecuteOutcome execute_sweep(const Sweep& sweep, const ExecuteOptions& options, std::ostream& log);

// Reads OUT/sweep.json, or throws SweepError naming the directory.
nlohmann::json read_manifest(const std::filesystem::path& dir);

// The point files of `manifest` found in dir/points, in manifest order (null where absent).
std::vector<nlohmann::json> read_points(const std::filesystem::path& dir, const nlohmann::json& manifest);

// Writes table.md, table.csv and table.json in dir from its manifest and point files;
// returns the table.
nlohmann::json write_tables(const std::filesystem::path& dir, const nlohmann::json& manifest,
                            const Targets& targets);

// Combines the output directories of shards of one sweep into `out`; a target `targets`
// leaves unset comes from the manifest. Throws SweepError
// (writing nothing) when they are different sweeps, when two hold different results for
// one point, or when a point is in none of them.
nlohmann::json merge_sweeps(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out,
                            Targets targets);

// Writes `text` to `file` via a temporary file in the same directory and a rename.
void write_atomic(const std::filesystem::path& file, const std::string& text);

}  // namespace dtsim::sweep
