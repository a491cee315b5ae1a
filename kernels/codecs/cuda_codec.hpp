// The device twin of a kind's codec (codec.hpp): its launches on the current CUDA stream,
// defined beside the CPU codec in the kind's codecs/ file (the calls it takes:
// cuda_calls.hpp) and named by the kind's registry entry (CompressorKindInfo::cuda_codec).
// A build without CUDA defines the same twins with no launches, so the registry reads the
// same in every build. Internal to kernels/.
#pragma once

#include <cstdint>

namespace dtsim::kernels {
struct CompressorSpec;
struct Payload;
}

namespace dtsim::kernels::codecs {

struct CudaCompress;  // cuda_calls.hpp: a compress call on the device
struct CudaDecode;    // cuda_calls.hpp: a decode on the device

struct CudaCodec {
  bool selects = false;  // needs a selection scratch region per segment (top_k, threshold)
  bool counts = false;   // needs L 64-bit counters of scratch (one_bit's negatives per segment)
  // A double per segment of `elements`, computed on the host and uploaded with the tables
  // (DeviceTables::segment_factors: qsgd's tau denominator); nullptr: the table is zeros.
  double (*segment_factor)(const CompressorSpec& spec, std::int64_t elements) = nullptr;
  void (*compress)(const CudaCompress& c, Payload& out) = nullptr;  // null: no CUDA path
  void (*decode)(const CudaDecode& d) = nullptr;
};

}  // namespace dtsim::kernels::codecs
