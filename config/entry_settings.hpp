// config::entry_settings: the settings struct a registry entry's parse stored in a spec's
// std::any (an algorithm's, a workload type's), or the struct's defaults when nothing
// was stored (a spec built in code, as the tests build them). A struct of another type is
// a caller's bug: std::bad_any_cast.
#pragma once

#include <any>

namespace dtsim::config {

template <class Settings>
const Settings& entry_settings(const std::any& stored) {
  static const Settings defaults{};
  if (!stored.has_value()) return defaults;
  return std::any_cast<const Settings&>(stored);
}

}  // namespace dtsim::config
