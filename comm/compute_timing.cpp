#include "comm/compute_timing.hpp"

#include <chrono>

#include "comm/device_sync.hpp"

namespace dtsim::comm {

double ComputeTiming::run(const sim::ComputeCost& cost, const std::function<void()>& work) const {
  if (kind == Kind::CostModel) {
    work();
    return model.seconds(cost);
  }
  wait_for_device();
  const auto start = std::chrono::steady_clock::now();
  work();
  wait_for_device();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace dtsim::comm
