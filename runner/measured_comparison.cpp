#include "runner/measured_comparison.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::runner {

MeasuredComparison compare_with_measured(CollectiveSweep sweep, const net::NcclTestsRun& run, std::string source) {
  sweep.sizes.clear();
  for (const auto& p : run.points) {
    if (p.type != "float" && p.type != "int32" && p.type != "uint32")
      throw std::invalid_argument(fmt::format("line {}: type {}: dtsim collective times 4-byte elements (nccl-tests -d "
                                              "float, int32 or uint32)",
                                              p.line, p.type));
    sweep.sizes.push_back(p.bytes);
  }
  MeasuredComparison c{.source = std::move(source), .nccl_version = run.nccl_version, .sweep = sweep};
  auto predicted = run_collective_sweep(sweep);
  std::vector<net::PointError> errors;
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    const auto& m = run.points[i];
    const auto& p = predicted[i];
    MeasuredComparisonRow row{.bytes = m.bytes,
                              .measured_us = m.in_place_us,
                              .predicted_us = p.time_us,
                              .measured_busbw_GBps = m.in_place_busbw_GBps,
                              .predicted_busbw_GBps = p.busbw_GBps,
                              .algorithm = p.algorithm.value_or("")};
    if (m.in_place_us > 0 && p.time_us > 0) {
      row.error = m.in_place_us / p.time_us - 1.0;
      errors.push_back({m.bytes, *row.error});
    }
    c.rows.push_back(std::move(row));
  }
  c.summary = net::summarize_errors(errors);
  c.predicted = collective_table(sweep, std::move(predicted));
  return c;
}

std::string format_measured_comparison(const MeasuredComparison& c) {
  const std::string ran = c.nccl_version.empty() ? "" : fmt::format("NCCL {} ran; ", c.nccl_version);
  std::string out = fmt::format("# {}\n# against {} ({}in place; error = predicted busbw / measured - 1)\n#\n",
                                c.predicted.title, c.source, ran);
  out += fmt::format("# {:>12} {:>13} {:>13} {:>14} {:>15} {:>9} {:>17}\n", "size", "measured(us)", "predicted(us)",
                     "measured(GB/s)", "predicted(GB/s)", "error", "algo");
  for (const auto& r : c.rows) {
    const std::string error = r.error ? fmt::format("{:+.1f} %", 100 * *r.error) : "-";
    out += fmt::format("  {:>12} {:>13.2f} {:>13.2f} {:>14.2f} {:>15.2f} {:>9} {:>17}\n", r.bytes, r.measured_us,
                       r.predicted_us, r.measured_busbw_GBps, r.predicted_busbw_GBps, error, r.algorithm);
  }
  const auto& s = c.summary;
  if (s.points == 0) return out + "# no size to compare (every time 0)\n";
  return out + fmt::format("# {} size{}: median |error| {:.1f} %, geometric mean {:.1f} %, worst {:.1f} % (at {} bytes)\n",
                           s.points, s.points == 1 ? "" : "s", 100 * s.median, 100 * s.geomean, 100 * s.worst,
                           s.worst_bytes);
}

nlohmann::json measured_comparison_json(const MeasuredComparison& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : c.rows)
    rows.push_back({{"bytes", r.bytes},
                    {"measured_us", r.measured_us},
                    {"predicted_us", r.predicted_us},
                    {"measured_busbw_GBps", r.measured_busbw_GBps},
                    {"predicted_busbw_GBps", r.predicted_busbw_GBps},
                    {"error", r.error ? nlohmann::json(*r.error) : nlohmann::json(nullptr)},
                    {"algorithm", r.algorithm}});
  const auto& s = c.summary;
  return {{"source", c.source},
          {"nccl_version", c.nccl_version},
          {"op", net::to_string(c.sweep.op)},
          {"ranks", c.sweep.ranks},
          {"setup", c.predicted.setup},
          {"rows", std::move(rows)},
          {"summary",
           {{"points", s.points}, {"median", s.median}, {"geomean", s.geomean}, {"worst", s.worst}, {"worst_bytes", s.worst_bytes}}}};
}

}  // namespace dtsim::runner
