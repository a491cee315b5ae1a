#include "workloads/workload_spec.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::workloads {

namespace {

struct LogisticData : WorkloadData {
  std::shared_ptr<const SyntheticDataset> dataset;
};

}  // namespace

const std::vector<std::string>& workload_types() {
  static const std::vector<std::string> types{"logistic_regression"};
  return types;
}

std::shared_ptr<const WorkloadData> load_workload_data(const WorkloadSpec& spec, std::uint64_t seed) {
  if (spec.type == "logistic_regression") {
    auto data = std::make_shared<LogisticData>();
    data->dataset = SyntheticDataset::generate(spec.logistic, seed);
    return data;
  }
  throw std::invalid_argument(fmt::format("unknown workload type '{}'", spec.type));
}

std::unique_ptr<Workload> make_workload(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data,
                                        std::uint64_t seed, int rank, int ranks) {
  if (spec.type == "logistic_regression") {
    const auto* logistic = dynamic_cast<const LogisticData*>(data.get());
    if (!logistic) throw std::invalid_argument("make_workload: data was not loaded for logistic_regression");
    return make_logistic_regression(spec.logistic, logistic->dataset, seed, rank, ranks);
  }
  throw std::invalid_argument(fmt::format("unknown workload type '{}'", spec.type));
}

}  // namespace dtsim::workloads
