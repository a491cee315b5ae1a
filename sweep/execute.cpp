#include "sweep/execute.hpp"

#include <ATen/Parallel.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "runner/resource_estimate.hpp"
#include "runner/run.hpp"
#include "sweep/child_process.hpp"
#include "sweep/table.hpp"

namespace dtsim::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<json> read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    return json::parse(in);
  } catch (const json::parse_error&) {
    return std::nullopt;
  }
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A finished point: the file parses and carries its id and a result.
bool finished(const fs::path& file, const std::string& id) {
  const auto doc = read_json(file);
  return doc && doc->is_object() && doc->value("id", "") == id && doc->contains("result");
}

// Temporary files of processes that no longer run (killed mid-write) are removed;
// those of a live process (another shard writing here) are left alone.
void remove_stale_temporaries(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto at = name.rfind(".tmp.");
    if (at == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
}

json point_json(const Sweep& sweep, const Point& p, const runner::RunResult& result) {
  json values = json::array(), axes = json::array();
  for (std::size_t k = 0; k < sweep.axes.size(); ++k) {
    const auto& a = sweep.axes[k];
    values.push_back(a.labels[p.value_of[k]]);
    axes.push_back({{"path", a.path}, {"name", a.name}, {"value", a.values[p.value_of[k]]}});
  }
  return {{"id", p.id},
          {"index", p.index},
          {"label", p.label},
          {"values", values},
          {"axes", axes},
          {"result", result.to_json()}};
}

}  // namespace

void write_atomic(const fs::path& file, const std::string& text) {
  // ".tmp.<pid>.<thread>": unique per writer, and remove_stale_temporaries reads the pid.
  const fs::path tmp = file.string() + fmt::format(".tmp.{}.{}", ::getpid(),
                                                   std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000);
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp.string()));
  }
  fs::rename(tmp, file);
}

json read_manifest(const fs::path& dir) {
  const auto doc = read_json(dir / "sweep.json");
  if (!doc || !doc->is_object() || !doc->contains("points") || !(*doc)["points"].is_array())
    throw SweepError(fmt::format("{}: not a sweep output directory (no readable sweep.json)", dir.string()));
  return *doc;
}

std::vector<json> read_points(const fs::path& dir, const json& manifest) {
  std::vector<json> points;
  for (const auto& p : manifest["points"]) {
    const std::string id = p.value("id", "");
    auto doc = read_json(dir / "points" / (id + ".json"));
    points.push_back(doc && doc->is_object() && doc->value("id", "") == id ? *doc : json(nullptr));
  }
  return points;
}

json write_tables(const fs::path& dir, const json& manifest, const Targets& targets) {
  const json table = make_table(manifest, read_points(dir, manifest), targets);
  write_atomic(dir / "table.json", table.dump(2) + "\n");
  write_atomic(dir / "table.csv", table_csv(table));
  write_atomic(dir / "table.md", table_markdown(table));
  return table;
}

ExecuteOutcome execute_sweep(const Sweep& sweep, const ExecuteOptions& options, std::ostream& log) {
  const fs::path points_dir = options.out_dir / "points";
  fs::create_directories(points_dir);
  remove_stale_temporaries(points_dir);
  const json manifest = sweep.manifest();
  write_atomic(options.out_dir / "sweep.json", manifest.dump(2) + "\n");

  ExecuteOutcome outcome;
  outcome.total = sweep.points.size();
  std::vector<const Point*> todo;
  for (const auto& p : sweep.points) {
    if (static_cast<int>(p.index % static_cast<std::size_t>(options.shards)) != options.shard) continue;
    ++outcome.selected;
    if (finished(points_dir / (p.id + ".json"), p.id)) ++outcome.skipped;
    else todo.push_back(&p);
  }
  int jobs = options.jobs > 0 ? options.jobs : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(todo.size())));
  log << fmt::format("sweep {}: {} points{}, {} already done, running {} in {} process{} at a time\n", sweep.name, outcome.total,
                     options.shards > 1 ? fmt::format(" (shard {}/{}: {})", options.shard + 1, options.shards, outcome.selected)
                                        : "",
                     outcome.skipped, todo.size(), todo.size() ? jobs : 0, jobs == 1 ? "" : "es");
  // A point that would take hours says so before anything runs (runner/resource_estimate.hpp).
  for (const Point* p : todo)
    if (const auto note = runner::long_run_note(p->scenario)) log << fmt::format("point {}: {}\n", p->label, *note);
  log.flush();

  std::size_t done = 0;
  const auto start = std::chrono::steady_clock::now();
  auto report = [&](const Point& p, double seconds, const std::string& error) {
    ++done;
    if (!error.empty()) outcome.failures.push_back(fmt::format("point {} ({}): {}", p.label, p.id, error));
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double eta = elapsed / static_cast<double>(done) * static_cast<double>(todo.size() - done);
    if (options.progress_bar) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(kWidth * done / todo.size());
      log << fmt::format("\r[{:#<{}}{:.<{}}] {}/{} points, elapsed {}, ETA {}   ", "", filled, "", kWidth - filled, done,
                         todo.size(), duration(elapsed), duration(eta));
      if (!error.empty()) log << fmt::format("\nfailed: {}: {}\n", p.label, error);
      if (done == todo.size()) log << "\n";
    } else {
      log << fmt::format("[{}/{}] {} {} in {:.2f} s{}\n", done, todo.size(), p.label, error.empty() ? "done" : "FAILED",
                         seconds, error.empty() ? "" : ": " + error);
    }
    log.flush();
  };
  // Each point runs in a child process of its own (child_process.hpp), at most `jobs` at
  // once, on one thread: no library state (Debian's serial OpenBLAS keeps buffers that
  // concurrent callers share) is ever shared by two points, so a point's file is the same
  // whatever --jobs, sharding or load, and a point that crashes fails alone.
  std::vector<Child> children;
  std::vector<const Point*> running;  // running[i] runs in children[i]
  std::size_t next = 0;
  while (next < todo.size() || !children.empty()) {
    while (next < todo.size() && static_cast<int>(children.size()) < jobs) {
      const Point& p = *todo[next++];
      log.flush();
      children.push_back(start_child(
          [] { at::set_num_threads(1); },  // the same in every point, whatever --jobs
          [&p, &sweep, &points_dir] {
            const auto result = runner::run_emulated(p.scenario);
            write_atomic(points_dir / (p.id + ".json"), point_json(sweep, p, result).dump(1) + "\n");
          },
          options.point_memory_bytes));
      running.push_back(&p);
    }
    const ChildEnd end = wait_any_child(children);
    const auto i = static_cast<std::size_t>(
        std::find_if(children.begin(), children.end(), [&](const Child& c) { return c.pid == end.pid; }) -
        children.begin());
    report(*running[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - children[i].started).count(),
           end.error);
    children.erase(children.begin() + static_cast<std::ptrdiff_t>(i));
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
  }
  outcome.ran = todo.size() - outcome.failures.size();
  log << fmt::format("ran {}, skipped {}{}\n", outcome.ran, outcome.skipped,
                     outcome.failures.empty() ? "" : fmt::format(", failed {}", outcome.failures.size()));
  outcome.table = write_tables(options.out_dir, manifest, sweep.targets);
  return outcome;
}

json merge_sweeps(const std::vector<fs::path>& inputs, const fs::path& out, Targets targets) {
  if (inputs.empty()) throw SweepError("merge: expected at least one sweep output directory");
  std::vector<json> manifests;
  for (const auto& dir : inputs) manifests.push_back(read_manifest(dir));
  auto same_sweep = [](const json& a, const json& b) {
    return a.value("name", "") == b.value("name", "") && a.value("axes", json()) == b.value("axes", json()) &&
           a["points"] == b["points"];
  };
  for (std::size_t i = 1; i < inputs.size(); ++i)
    if (!same_sweep(manifests[0], manifests[i]))
      throw SweepError(fmt::format("merge: {} holds a different sweep from {} (their sweep.json name, axes or points "
                                   "differ)",
                                   inputs[i].string(), inputs[0].string()));
  const json& manifest = manifests[0];
  // For every point: the one text all inputs that have it agree on.
  std::vector<std::pair<std::string, std::string>> files;  // id, text
  std::vector<std::string> missing;
  for (const auto& p : manifest["points"]) {
    const std::string id = p.value("id", "");
    std::optional<json> chosen;
    std::string text;
    fs::path from;
    for (const auto& dir : inputs) {
      const fs::path file = dir / "points" / (id + ".json");
      if (!finished(file, id)) continue;
      const std::string t = read_text(file);
      const json doc = json::parse(t);
      if (!chosen) {
        chosen = doc;
        text = t;
        from = dir;
      } else if (doc != *chosen) {
        throw SweepError(fmt::format("merge: point {} ({}) has different results in {} and {}", p.value("label", ""), id,
                                     from.string(), dir.string()));
      }
    }
    if (!chosen) missing.push_back(id);
    else files.emplace_back(id, text);
  }
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size() && i < 5; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 5) list += fmt::format(", ... ({} more)", missing.size() - 5);
    throw SweepError(fmt::format("merge: {} of {} points are in none of the inputs (run the missing shards): {}",
                                 missing.size(), manifest["points"].size(), list));
  }
  fs::create_directories(out / "points");
  write_atomic(out / "sweep.json", manifest.dump(2) + "\n");
  for (const auto& [id, text] : files) write_atomic(out / "points" / (id + ".json"), text);
  if (!targets.loss && manifest.contains("target_loss") && manifest["target_loss"].is_number())
    targets.loss = manifest["target_loss"].get<double>();
  if (!targets.accuracy && manifest.contains("target_accuracy") && manifest["target_accuracy"].is_number())
    targets.accuracy = manifest["target_accuracy"].get<double>();
  return write_tables(out, manifest, targets);
}

}  // namespace dtsim::sweep
