#include "comm/phase_timer.hpp"

#include <algorithm>

namespace dtsim::comm {

PhaseTimer::Scope PhaseTimer::phase(std::string_view name) { return Scope(*this, index_of(name)); }

std::size_t PhaseTimer::index_of(std::string_view name) {
  auto it = std::find(names_.begin(), names_.end(), name);
  const auto index = static_cast<std::size_t>(it - names_.begin());
  if (it == names_.end()) {
    names_.emplace_back(name);
    current_.push_back(0.0);
  }
  return index;
}

std::vector<double> PhaseTimer::take_step() {
  std::vector<double> step = current_;
  std::fill(current_.begin(), current_.end(), 0.0);
  return step;
}

}  // namespace dtsim::comm
