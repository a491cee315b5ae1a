// terngrad's settings (the entry and codec: terngrad.cpp), what a scenario sets under
// /algorithm/compressor besides the seed: its scales per tensor or per bucket. LibTorch-free.
#pragma once

#include "kernels/codecs/bucket_settings.hpp"

namespace dtsim::kernels {

using TernGradSettings = BucketSettings;

}  // namespace dtsim::kernels
