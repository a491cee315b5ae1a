// "Did you mean": the valid name closest to what a user typed, for error messages that
// name a misspelt field, value, command or flag together with what it should have been.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dtsim::config {

// Edits (insert, delete, substitute, swap two neighbours) between a and b, ignoring case.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The name in `names` closest to `typed`, when it is close enough to be a slip of the
// keyboard: at most a third of the longer one's characters edited (at least one, at most
// three); ties go to the earlier name. nullopt when none is, or `typed` is one of them.
std::optional<std::string> closest_name(std::string_view typed, std::span<const std::string> names);

// " (did you mean `x`?)" for the closest name, or "".
std::string did_you_mean(std::string_view typed, std::span<const std::string> names);

}  // namespace dtsim::config
