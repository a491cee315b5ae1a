// The device twin of a kind's codec (codec.hpp): its launches on the current CUDA stream,
// defined in kernels/compressor_cuda.cpp (the one file the CUDA compile check sees) and
// named by the kind's registry entry (CompressorKindInfo::cuda_codec). A build without
// CUDA defines the same twins with no launches, so the registry reads the same in every
// build. Internal to kernels/.
#pragma once

namespace dtsim::kernels {
struct Payload;
}

namespace dtsim::kernels::codecs {

struct CudaCompress;  // compressor_cuda.cpp: a compress call on the device
struct CudaDecode;    // compressor_cuda.cpp: a decode on the device

struct CudaCodec {
  bool selects = false;  // needs a selection scratch region per segment (top_k, threshold)
  bool counts = false;   // needs L 64-bit counters of scratch (one_bit's negatives per segment)
  void (*compress)(const CudaCompress& c, Payload& out) = nullptr;  // null: no CUDA path
  void (*decode)(const CudaDecode& d) = nullptr;
};

}  // namespace dtsim::kernels::codecs
