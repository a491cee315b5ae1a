#include "comm/phase_timer.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dtsim::comm {

PhaseTimer::Scope PhaseTimer::phase(std::string_view name) { return Scope(*this, index_of(name)); }

std::size_t PhaseTimer::index_of(std::string_view name) {
  auto it = std::find(names_.begin(), names_.end(), name);
  const auto index = static_cast<std::size_t>(it - names_.begin());
  if (it == names_.end()) {
    // One naming rule, so that tables and result files group phases the same way for
    // every algorithm: lowercase words, a '/' between the group and the step.
    const bool valid = !name.empty() && name.front() != '/' && name.back() != '/' &&
                       std::count(name.begin(), name.end(), '/') <= 1 &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '/';
                       });
    if (!valid)
      throw std::logic_error("phase name \"" + std::string(name) +
                             "\": expected lowercase words, a '/' between the group and the step (sync/compress)");
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
