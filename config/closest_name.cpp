#include "config/closest_name.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

namespace dtsim::config {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  // Optimal string alignment distance over three rows of the table.
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::size_t> before(m + 1), previous(m + 1), current(m + 1);
  for (std::size_t j = 0; j <= m; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t substitute = previous[j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[m];
}

std::optional<std::string> closest_name(std::string_view typed, std::span<const std::string> names) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& name : names) {
    if (name == typed) return std::nullopt;
    const std::size_t distance = edit_distance(typed, name);
    const std::size_t allowed = std::clamp<std::size_t>(std::max(typed.size(), name.size()) / 3, 1, 3);
    if (distance <= allowed && (!best || distance < best_distance)) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view typed, std::span<const std::string> names) {
  const auto name = closest_name(typed, names);
  return name ? fmt::format(" (did you mean `{}`?)", *name) : std::string();
}

}  // namespace dtsim::config
