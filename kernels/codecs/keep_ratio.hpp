// The keep_ratio / set_keep_ratio of a kind's entry whose settings keep a share `ratio` of
// each tensor (top_k, random_k). Internal to kernels/.
#pragma once

#include "kernels/compressor_spec.hpp"

namespace dtsim::kernels::codecs {

template <class Settings>
double keep_ratio_of(const CompressorSpec& spec) {
  return compressor_settings<Settings>(spec).ratio;
}

template <class Settings>
void set_keep_ratio_of(CompressorSpec& spec, double ratio) {
  auto s = compressor_settings<Settings>(spec);
  s.ratio = ratio;
  spec.settings = s;
}

}  // namespace dtsim::kernels::codecs
