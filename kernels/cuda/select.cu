// Top-k by magnitude (radix select) and threshold selection on the GPU, returning the
// same (indices, values) as kernels/cpu/select.cpp: selected elements in index order,
// ties at the k-th magnitude to the lowest indices.
//
// 1. three digit passes over the 31-bit magnitude keys (bits 30..20, 19..9, 8..0): a
//    shared-memory histogram of the keys matching the prefix found so far, then one
//    thread picks the digit where the running count from the top reaches k; the state
//    (prefix, mask, still needed) stays on the device, so nothing synchronizes the host;
// 2. per 4096-element block, counts of keys above and equal to the k-th key;
// 3. one thread turns them into block offsets (exclusive prefix sums);
// 4. each block writes its selected elements in index order (ballot + popc scans).
// Napkin math: 5 reads of x (3 histograms, count, write) + k * 8 bytes written; the
// first histogram dominates for small k.
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/compress.cuh"

namespace dtsim::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTiles = 16;
constexpr std::int64_t kPerBlock = kThreads * kTiles;
constexpr int kBins = 2048;
__constant__ int kShift[3] = {20, 9, 0};
__constant__ std::uint32_t kMask[3] = {0x7FFu, 0x7FFu, 0x1FFu};

struct State {
  std::uint32_t prefix;  // the k-th key's digits found so far
  std::uint32_t fixed;   // the bits of prefix already decided
  std::int64_t need;     // keys equal to the k-th still to take
  std::int64_t total;    // selected count (threshold mode)
};

struct Layout {
  State* state;
  std::uint32_t* hist;
  std::int64_t* counts;   // 2 per block: above, equal
  std::int64_t* offsets;  // 2 per block: exclusive prefix sums
};

std::int64_t blocks_for(std::int64_t n) { return (n + kPerBlock - 1) / kPerBlock; }

Layout layout(void* ws, std::int64_t n) {
  auto* base = static_cast<unsigned char*>(ws);
  Layout l;
  l.state = reinterpret_cast<State*>(base);
  l.hist = reinterpret_cast<std::uint32_t*>(base + 64);
  l.counts = reinterpret_cast<std::int64_t*>(base + 64 + 4 * kBins);
  l.offsets = l.counts + 2 * blocks_for(n);
  return l;
}

enum class Mode { top_k, threshold };

__device__ __forceinline__ bool above(Mode mode, float v, std::uint32_t kth, float t) {
  return mode == Mode::top_k ? mag_key(v) > kth : (fabsf(v) >= t || isnan(v));
}

__global__ void init_kernel(State* st, std::int64_t k) {
  st->prefix = 0;
  st->fixed = 0;
  st->need = k;
  st->total = 0;
}

__global__ void hist_kernel(const float* __restrict__ x, std::int64_t n, int d, const State* st,
                            std::uint32_t* hist) {
  __shared__ std::uint32_t sh[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) sh[b] = 0;
  __syncthreads();
  const std::uint32_t prefix = st->prefix, fixed = st->fixed;
  const int shift = kShift[d];
  const std::uint32_t mask = kMask[d];
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t key = mag_key(x[i]);
    if ((key & fixed) == prefix) atomicAdd(&sh[(key >> shift) & mask], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x)
    if (sh[b]) atomicAdd(&hist[b], sh[b]);
}

__global__ void pick_kernel(const std::uint32_t* hist, int d, State* st) {
  const int bins = static_cast<int>(kMask[d]) + 1;
  std::int64_t cum = 0;
  int bin = 0;
  for (int b = bins - 1; b >= 0; --b) {
    if (cum + hist[b] >= st->need) {
      bin = b;
      break;
    }
    cum += hist[b];
  }
  st->need -= cum;
  st->prefix |= static_cast<std::uint32_t>(bin) << kShift[d];
  st->fixed |= kMask[d] << kShift[d];
}

__global__ void count_kernel(const float* __restrict__ x, std::int64_t n, Mode mode, float t, const State* st,
                             std::int64_t* counts) {
  __shared__ unsigned long long sums[2];
  if (threadIdx.x == 0) sums[0] = sums[1] = 0;
  __syncthreads();
  const std::uint32_t kth = st->prefix;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kPerBlock;
  const std::int64_t end = begin + kPerBlock < n ? begin + kPerBlock : n;
  unsigned long long gt = 0, eq = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float v = x[i];
    if (above(mode, v, kth, t))
      ++gt;
    else if (mode == Mode::top_k && mag_key(v) == kth)
      ++eq;
  }
  atomicAdd(&sums[0], gt);
  atomicAdd(&sums[1], eq);
  __syncthreads();
  if (threadIdx.x == 0) {
    counts[2 * blockIdx.x] = static_cast<std::int64_t>(sums[0]);
    counts[2 * blockIdx.x + 1] = static_cast<std::int64_t>(sums[1]);
  }
}

__global__ void scan_kernel(const std::int64_t* counts, std::int64_t blocks, std::int64_t* offsets, State* st) {
  std::int64_t gt = 0, eq = 0;
  for (std::int64_t b = 0; b < blocks; ++b) {
    offsets[2 * b] = gt;
    offsets[2 * b + 1] = eq;
    gt += counts[2 * b];
    eq += counts[2 * b + 1];
  }
  st->total = gt;
}

// Exclusive prefix count of `flag` over the block's threads (in thread order); *total
// gets the block's count. sh holds kThreads / 32 + 1 ints.
__device__ __forceinline__ int block_scan(bool flag, int* sh, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned ballot = __ballot_sync(0xFFFFFFFFu, flag);
  const int in_warp = __popc(ballot & ((1u << lane) - 1u));
  if (lane == 0) sh[warp] = __popc(ballot);
  __syncthreads();
  if (threadIdx.x == 0) {
    int acc = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      const int c = sh[w];
      sh[w] = acc;
      acc += c;
    }
    sh[kThreads / 32] = acc;
  }
  __syncthreads();
  const int result = sh[warp] + in_warp;
  *total = sh[kThreads / 32];
  __syncthreads();
  return result;
}

__global__ void write_kernel(const float* __restrict__ x, std::int64_t n, Mode mode, float t, const State* st,
                             const std::int64_t* offsets, std::uint32_t* __restrict__ idx, float* __restrict__ val) {
  __shared__ int sh[kThreads / 32 + 1];
  const std::uint32_t kth = st->prefix;
  const std::int64_t need = mode == Mode::top_k ? st->need : 0;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kPerBlock;
  std::int64_t eq_base = offsets[2 * blockIdx.x + 1];
  std::int64_t sel_base = offsets[2 * blockIdx.x] + (eq_base < need ? eq_base : need);
  for (int tile = 0; tile < kTiles; ++tile) {
    const std::int64_t i = begin + static_cast<std::int64_t>(tile) * kThreads + threadIdx.x;
    const bool valid = i < n;
    const float v = valid ? x[i] : 0.0f;
    const bool gt = valid && above(mode, v, kth, t);
    const bool eq = valid && !gt && mode == Mode::top_k && mag_key(v) == kth;
    int eq_total = 0, sel_total = 0;
    const int eq_pre = block_scan(eq, sh, &eq_total);
    const bool sel = gt || (eq && eq_base + eq_pre < need);
    const int sel_pre = block_scan(sel, sh, &sel_total);
    if (sel) {
      idx[sel_base + sel_pre] = static_cast<std::uint32_t>(i);
      val[sel_base + sel_pre] = v;
    }
    sel_base += sel_total;
    eq_base += eq_total;
  }
}

void count_and_scan(const float* x, std::int64_t n, Mode mode, float t, const Layout& l, cudaStream_t s) {
  const std::int64_t blocks = blocks_for(n);
  count_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(x, n, mode, t, l.state, l.counts);
  DTSIM_CUDA_CHECK(cudaGetLastError());
  scan_kernel<<<1, 1, 0, s>>>(l.counts, blocks, l.offsets, l.state);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

void write(const float* x, std::int64_t n, Mode mode, float t, const Layout& l, std::uint32_t* idx, float* val,
           cudaStream_t s) {
  write_kernel<<<static_cast<unsigned>(blocks_for(n)), kThreads, 0, s>>>(x, n, mode, t, l.state, l.offsets, idx, val);
  DTSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

std::int64_t select_workspace_bytes(std::int64_t n) { return 64 + 4 * kBins + 4 * 8 * (blocks_for(n) + 1); }

void top_k(const float* x, std::int64_t n, std::int64_t k, void* workspace, std::uint32_t* idx, float* val,
           void* stream) {
  if (k <= 0 || n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const Layout l = layout(workspace, n);
  init_kernel<<<1, 1, 0, s>>>(l.state, k);
  DTSIM_CUDA_CHECK(cudaGetLastError());
  if (k >= n) {  // everything: |x| >= 0 or NaN holds for every element
    count_and_scan(x, n, Mode::threshold, 0.0f, l, s);
    write(x, n, Mode::threshold, 0.0f, l, idx, val, s);
    return;
  }
  for (int d = 0; d < 3; ++d) {
    DTSIM_CUDA_CHECK(cudaMemsetAsync(l.hist, 0, 4 * kBins, s));
    hist_kernel<<<grid_for(n, kThreads, 4 * 132), kThreads, 0, s>>>(x, n, d, l.state, l.hist);
    DTSIM_CUDA_CHECK(cudaGetLastError());
    pick_kernel<<<1, 1, 0, s>>>(l.hist, d, l.state);
    DTSIM_CUDA_CHECK(cudaGetLastError());
  }
  count_and_scan(x, n, Mode::top_k, 0.0f, l, s);
  write(x, n, Mode::top_k, 0.0f, l, idx, val, s);
}

std::int64_t threshold_count(const float* x, std::int64_t n, float t, void* workspace, void* stream) {
  if (n == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const Layout l = layout(workspace, n);
  init_kernel<<<1, 1, 0, s>>>(l.state, 0);
  DTSIM_CUDA_CHECK(cudaGetLastError());
  count_and_scan(x, n, Mode::threshold, t, l, s);
  std::int64_t total = 0;
  DTSIM_CUDA_CHECK(cudaMemcpyAsync(&total, &l.state->total, sizeof(total), cudaMemcpyDeviceToHost, s));
  DTSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  return total;
}

void threshold_select(const float* x, std::int64_t n, float t, void* workspace, std::uint32_t* idx, float* val,
                      void* stream) {
  if (n == 0) return;
  write(x, n, Mode::threshold, t, layout(workspace, n), idx, val, static_cast<cudaStream_t>(stream));
}

}  // namespace dtsim::kernels::cuda
