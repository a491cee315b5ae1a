// one_bit's settings (the entry and codec: one_bit.cpp), what a scenario sets under
// /algorithm/compressor: its pairs of means per tensor or per bucket. LibTorch-free.
#pragma once

#include "kernels/codecs/bucket_settings.hpp"

namespace dtsim::kernels {

using OneBitSettings = BucketSettings;

}  // namespace dtsim::kernels
