// CPU selection kernels for the sparsifiers: exact top-k by magnitude (a radix select of
// three digits over the candidates whose first digit reaches the k-th key's; that digit
// from a sample of the keys when k <= n / 8, else from a histogram of all of them;
// nth_element up to 1024 elements), threshold selection, and seeded random-k index sets. Indices are segment-local
// uint32 and come out in increasing order; values are the selected elements unchanged.
//
// Magnitude order is the order of mag_key (common.hpp): NaN ranks above +Inf, +-0 tie.
// Ties at the k-th largest magnitude go to the lowest indices, so the selected set is a
// function of the input alone (the CUDA kernel returns the same set in the same order).
#pragma once

#include <cstdint>
#include <vector>

namespace dtsim::kernels::cpu {

// Scratch reused across calls (grows to the largest size seen, never shrinks).
struct SelectWorkspace {
  std::vector<std::uint32_t> hist;        // per-part radix histograms
  std::vector<std::uint32_t> candidates;  // indices whose top digit reaches the k-th one (grown 2x)
  std::vector<std::uint32_t> candidate_keys;  // and their magnitude keys (top-k of <= 1024: all the keys)
  std::vector<std::int64_t> part_counts;
  std::vector<std::uint64_t> bitmap;      // random-k membership bits, all zero between calls
};

// The k (0 <= k <= n) largest-magnitude elements of x[0..n): their indices, increasing,
// in idx[0..k) and values in val[0..k).
template <class T>
void top_k(const T* x, std::int64_t n, std::int64_t k, SelectWorkspace& ws, std::uint32_t* idx, T* val);

// Threshold selection in two passes over parts of x: threshold_count returns how many
// elements have |x| >= t or are NaN (t >= 0) and leaves the per-part running counts in
// part_counts[0 .. threshold_parts(n)]; threshold_select then writes them.
std::int64_t threshold_parts(std::int64_t n);
template <class T>
std::int64_t threshold_count(const T* x, std::int64_t n, float t, std::int64_t* part_counts);
template <class T>
void threshold_select(const T* x, std::int64_t n, float t, const std::int64_t* part_counts, std::uint32_t* idx,
                      T* val);

// k distinct indices drawn uniformly from [0, n) by Floyd's algorithm, from the stream
// `key` (detail::stream_key), written in increasing order.
void random_k_indices(std::int64_t n, std::int64_t k, std::uint64_t key, SelectWorkspace& ws, std::uint32_t* idx);

}  // namespace dtsim::kernels::cpu
