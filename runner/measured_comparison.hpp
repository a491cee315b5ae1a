// `dtsim collective --against FILE`: the model's prediction beside every size a run of
// nccl-tests measured (FILE: its stdout, net::parse_nccl_tests_output), so a user can see
// how far the model is from their own machine before trusting its step times: the sweep
// runs exactly the measured sizes, and each row puts the in-place time and busbw measured
// next to the predicted ones, with the error (predicted busbw / measured - 1, which is
// measured time / predicted time - 1) and the algorithm the model ran (NCCL's choice on a
// described machine), then the median, geometric mean and worst |error|
// (net::summarize_errors), as bench/results/nccl-validation.md reports the published curves.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "network_models/nccl_tests_output.hpp"
#include "network_models/prediction_error.hpp"
#include "runner/collective_table.hpp"

namespace dtsim::runner {

struct MeasuredComparisonRow {
  std::int64_t bytes = 0;
  double measured_us = 0.0, predicted_us = 0.0;  // in place
  double measured_busbw_GBps = 0.0, predicted_busbw_GBps = 0.0;
  std::optional<double> error;  // none where either time is 0 (nothing to compare)
  std::string algorithm;
};

struct MeasuredComparison {
  std::string source;      // the measured run's file, as named
  std::string nccl_version;  // the NCCL release that ran, where the run printed it
  CollectiveSweep sweep;   // its sizes the run's
  net::NcclTable predicted;  // the model's table for those sizes
  std::vector<MeasuredComparisonRow> rows;
  net::ErrorSummary summary;
};

// `sweep` with the run's sizes: its operation, ranks and GPUs per thread must be the run's
// already (the caller reconciles them with the flags). Throws std::invalid_argument for a
// run whose elements are not 4 bytes (dtsim's sweeps time fp32: -d float, int32, uint32).
MeasuredComparison compare_with_measured(CollectiveSweep sweep, const net::NcclTestsRun& run, std::string source);
std::string format_measured_comparison(const MeasuredComparison& c);
// {"source", "nccl_version" ("" where not printed), "op", "ranks", "setup" (the predicted
// table's), "rows": [{"bytes", "measured_us", "predicted_us", "measured_busbw_GBps",
// "predicted_busbw_GBps", "error", "algorithm"}],
// "summary": {"points", "median", "geomean", "worst", "worst_bytes"}}; error null where none.
nlohmann::json measured_comparison_json(const MeasuredComparison& c);

}  // namespace dtsim::runner
