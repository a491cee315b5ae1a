#include "kernels/cpu/common.hpp"

#include <cstdlib>
#include <cstring>

namespace dtsim::kernels::cpu {

namespace {

// DTSIM_KERNELS_ISA=baseline | avx2 caps the paths picked at run time (to test the
// portable ones on a machine that has more); unset or anything else: no cap.
int isa_cap() {
  const char* v = std::getenv("DTSIM_KERNELS_ISA");
  if (v && std::strcmp(v, "baseline") == 0) return 0;
  if (v && std::strcmp(v, "avx2") == 0) return 1;
  return 2;
}

}  // namespace

bool has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = isa_cap() >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
  return yes;
#else
  return false;
#endif
}

bool has_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = isa_cap() >= 2 && has_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl");
  return yes;
#else
  return false;
#endif
}

std::int64_t partial_slots(const std::int64_t* offsets, std::int64_t L, std::int64_t* slot_begin) {
  std::int64_t slots = 0;
  for (std::int64_t s = 0; s < L; ++s) {
    slot_begin[s] = slots;
    const std::int64_t a = offsets[s], b = offsets[s + 1];
    if (b > a) slots += (b - 1) / kChunk - a / kChunk + 1;
  }
  slot_begin[L] = slots;
  return slots;
}

void fold_partials(float* partials, const std::int64_t* slot_begin, std::int64_t L, float* out) {
  for (std::int64_t s = 0; s < L; ++s) {
    float* p = partials + slot_begin[s];
    std::int64_t m = slot_begin[s + 1] - slot_begin[s];
    if (m == 0) {
      out[s] = 0.0f;
      continue;
    }
    while (m > 1) {
      const std::int64_t half = m / 2;
      for (std::int64_t i = 0; i < half; ++i) p[i] = p[2 * i] + p[2 * i + 1];
      if (m % 2 == 1) p[half] = p[m - 1];
      m = half + m % 2;
    }
    out[s] = p[0];
  }
}

}  // namespace dtsim::kernels::cpu
