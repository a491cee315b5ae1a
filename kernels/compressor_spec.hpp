// kernels::CompressorSpec: what a scenario says about a compressor, apart from the
// compressor itself (compressor.hpp), so that the scenario's readers and the algorithms'
// settings need neither LibTorch nor the codecs.
#pragma once

#include <any>
#include <cstdint>
#include <string>

#include "config/entry_settings.hpp"

namespace dtsim::kernels {

struct CompressorKindInfo;  // compressor_kinds.hpp: a kind's registry entry

// The part every kind shares (its name and, for the kinds that draw at random, the seed)
// and the kind's own settings struct, declared in its codecs/<kind>.hpp (TopKSettings,
// RandomKSettings, ThresholdSettings, QsgdSettings, OneBitSettings and TernGradSettings,
// which are BucketSettings); a kind without fields has none. A default is written once, in that struct.
struct CompressorSpec {
  std::string kind = "identity";  // a name in the registry (compressor_kinds.hpp)
  std::uint64_t seed = 0;         // the kinds that draw (CompressorKindInfo::draws); the others ignore it
  std::any settings;              // the kind's settings struct; empty: its defaults
};

// The kind's settings struct stored in spec.settings, or its defaults when none is
// (config/entry_settings.hpp). The Compressor's constructor refuses a struct of another
// kind, so a codec reads its own safely.
template <class Settings>
const Settings& compressor_settings(const CompressorSpec& spec) {
  return config::entry_settings<Settings>(spec.settings);
}

// The same struct for writing (a spec built in code), stored with its defaults first when
// spec.settings holds none; another kind's struct: std::bad_any_cast.
template <class Settings>
Settings& edit_settings(CompressorSpec& spec) {
  if (!spec.settings.has_value()) spec.settings = Settings{};
  return std::any_cast<Settings&>(spec.settings);
}

}  // namespace dtsim::kernels
