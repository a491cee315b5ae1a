#!/usr/bin/env bash
# scripts/gpu-check.sh RESULTS_DIR [--dry-run]
#
# The whole GPU check of dtsim, unattended, on a CUDA machine that has PyTorch 2.x (its
# CUDA LibTorch, nvcc, cmake, ninja) and the .devdeps bundle (../shared/device/README.md):
#
#   env          nvidia-smi, torch version and C++ ABI, nvcc, commit         -> env.log
#   configure    cmake against torch's LibTorch + .devdeps, CUDA arch 90,    -> configure.log
#                the options of scripts/torch2.sh (scripts/torch2-config.sh)
#   build        only the targets below, ninja -k 0 -j16, warnings not errors -> build.log
#                (again without the Gloo backend, should it fail to compile: -> build-no-gloo.log)
#   test-*       CompressorCuda.*, AggregationCuda.*, TensorBufferCuda.* (with
#                Build.*: OpenMP works), emulated_device_test                -> <name>.json (gtest)
#   bench-kernels  dtsim_kernels_bench --benchmark_filter=Cuda               -> kernels_cuda.json
#   bench-nccl   dtsim_nccl_bench, all-reduce 8 B .. 1 GB, one rank          -> nccl_allreduce.json
#   bench-emulated-{cuda,cpu}  dtsim_emulated_bench on ResNet-20 x 64 ranks  -> emulated_{cuda,cpu}.json
#
# Every step logs to RESULTS_DIR/<step>.log, has its own timeout, and the next step runs
# whether it passed or not; the whole run also stops starting steps once its budget
# (GPU_CHECK_BUDGET_S, default 480 s) is spent, so one bad step cannot eat the machine's
# time. RESULTS_DIR/summary.txt and summary.json list each step: ok, FAILED (why), or
# skipped (why). Exit status: 1 if a step failed, else 0.
#
# Without CUDA (no GPU, or no CUDA PyTorch: this CPU development machine) it still
# configures and builds against whatever LibTorch CMake finds and runs what can run
# there (the CUDA test cases and benchmarks then skip, and say so); --dry-run only prints
# the plan. Both exit 0 when nothing failed.
#
# PyTorch: python3's (a GPU machine's, system-wide), else scripts/torch2.sh's .venv-torch2
# (this machine), else none (CMake then finds Debian's LibTorch 1.13).
#
# Environment: GPU_CHECK_JOBS (default 16), GPU_CHECK_BUILD_DIR (default build/gpu-check),
# GPU_CHECK_BUDGET_S (default 480), GPU_CHECK_WERROR (default OFF: warnings are counted,
# not fatal, since the GPU machine's torch may deprecate what this one accepts; ON with
# GPU_CHECK_BUILD_DIR=build/torch2 reuses scripts/torch2.sh's build as it is),
# DTSIM_COMMIT (when the tree has no .git), TORCH2_PYTHON (a python with torch).
set -u -o pipefail

usage() { echo "usage: scripts/gpu-check.sh RESULTS_DIR [--dry-run] | --dry-run" >&2; exit 2; }

results="" dry_run=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
    -*) usage ;;
    *) [ -z "$results" ] || usage; results="$arg" ;;
  esac
done
[ -n "$results" ] || { [ "$dry_run" = 1 ] && results=$(mktemp -d /tmp/gpu-check-dry.XXXXXX); } || usage

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
# shellcheck source=scripts/torch2-config.sh
. "$root/scripts/torch2-config.sh"
mkdir -p "$results" || exit 2
results=$(cd "$results" && pwd)
jobs=${GPU_CHECK_JOBS:-16}
build=${GPU_CHECK_BUILD_DIR:-build/gpu-check}
budget=${GPU_CHECK_BUDGET_S:-480}
start=$(date +%s)
exec > >(tee -a "$results/gpu-check.log") 2>&1

say() { echo "gpu-check: $*"; }
summary=()  # "step|status|seconds|note"

# step NAME TIMEOUT_S COMMAND...: runs COMMAND under `timeout` (capped by the budget left),
# output to RESULTS_DIR/NAME.log; records ok / FAILED.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$(( budget - ($(date +%s) - start) ))
  if [ "$dry_run" = 1 ]; then
    say "[$name] would run (timeout ${limit} s): $*"
    summary+=("$name|skipped|0|dry run")
    return 0
  fi
  if [ "$left" -lt 15 ]; then
    say "[$name] skipped: the ${budget} s budget is spent"
    summary+=("$name|skipped|0|budget spent")
    return 1
  fi
  [ "$limit" -le "$left" ] || limit=$left
  say "[$name] $* (timeout ${limit} s)"
  local t0 rc
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$results/$name.log" 2>&1
  rc=$?
  local dt=$(( $(date +%s) - t0 ))
  if [ "$rc" = 0 ]; then
    summary+=("$name|ok|$dt|")
    say "[$name] ok (${dt} s)"
  else
    local why="exit $rc"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && why="timed out after ${limit} s"
    summary+=("$name|FAILED|$dt|$why")
    say "[$name] FAILED: $why (${dt} s); last lines of $name.log:"
    tail -n 15 "$results/$name.log" | sed 's/^/    /'
  fi
  return "$rc"
}

skip() {  # skip NAME WHY
  say "[$1] skipped: $2"
  summary+=("$1|skipped|0|$2")
}

# Marks the last recorded step FAILED with `why` (a check on its output, after it ran).
fail_last() {
  local last=${summary[-1]}
  IFS='|' read -r name _ dt _ <<<"$last"
  summary[-1]="$name|FAILED|$dt|$1"
  say "[$name] FAILED on inspection of its output: $1"
}

# Adds a note to the last recorded step (what ran inside it was skipped, and why).
note_last() {
  local last=${summary[-1]}
  IFS='|' read -r name status dt note <<<"$last"
  summary[-1]="$name|$status|$dt|${note:+$note; }$1"
  say "[$name] note: $1"
}

# --- What this machine has ------------------------------------------------------------------
torch_prefix="" torch_version="none" torch_cuda="" torch_abi=""
torch_python=$(torch2_python "$root/.venv-torch2") && torch2_facts "$torch_python" || torch_python=""
cuda=0 why_no_cuda=""
if ! nvidia-smi -L >/dev/null 2>&1; then
  why_no_cuda="nvidia-smi finds no GPU"
elif [ -z "$torch_prefix" ]; then
  why_no_cuda="no PyTorch for python3 nor in .venv-torch2 (its CUDA LibTorch is what the GPU build links)"
elif [ -z "$torch_cuda" ]; then
  why_no_cuda="PyTorch $torch_version is a CPU build"
elif ! "$torch_python" -c 'import torch,sys;sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  why_no_cuda="torch.cuda.is_available() is False"
else
  cuda=1
fi
commit=${DTSIM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
dirty=$(git status --porcelain 2>/dev/null | wc -l)

say "results in $results; build in $build; -j$jobs; budget ${budget} s; commit $commit (+$dirty changed files)"
if [ "$cuda" = 1 ]; then
  say "CUDA mode: PyTorch $torch_version (CUDA $torch_cuda, C++11 ABI ${torch_abi:-?})"
else
  say "NO CUDA: $why_no_cuda. Degraded mode: configure and build against the LibTorch CMake finds, run"
  say "what runs without a GPU; the CUDA test cases skip, the CUDA benchmarks and the cuda emulated run are skipped."
fi
if [ "$cuda" = 1 ] && [ "$torch_abi" = 0 ]; then
  say "WARNING: this PyTorch uses the pre-C++11 std::string ABI; the .devdeps libraries (fmt, GoogleTest,"
  say "Google Benchmark) are Debian's, built with the C++11 ABI, so linking them will fail (undefined"
  say "references with [abi:cxx11]). A PyTorch whose torch.compiled_with_cxx11_abi() is True (2.7 on) avoids it."
fi
if [ -d "$root/.devdeps/usr/lib/x86_64-linux-gnu" ]; then
  export LD_LIBRARY_PATH="$root/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif [ "$cuda" = 1 ]; then
  say "WARNING: no .devdeps/ (../shared/device/make-bundle.sh makes it): fmt, CLI11, GoogleTest, Benchmark may be missing"
fi

env_report() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit (+$dirty changed files)"
  echo "host: $(hostname) $(uname -r), $(nproc) cores"
  echo "torch: $torch_version (CUDA ${torch_cuda:-none}, C++11 ABI ${torch_abi:-?}) at ${torch_prefix:-none} (${torch_python:-no python with torch})"
  echo "cmake: $(cmake --version | head -n1)"
  echo "ninja: $(ninja --version 2>/dev/null || echo none)"
  echo "c++: $(c++ --version 2>/dev/null | head -n1)"
  echo "nvcc: $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -n1)"
  echo "cuda mode: $cuda ${why_no_cuda:+($why_no_cuda)}"
  if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1; else echo "nvidia-smi: not installed"; fi
}
# Under `timeout` too: nvidia-smi can hang on a broken driver.
export -f env_report
export commit dirty torch_version torch_cuda torch_abi torch_prefix torch_python cuda why_no_cuda
step env 30 bash -c env_report
if [ "$dry_run" = 1 ]; then env_report | sed 's/^/    /'; else sed 's/^/    /' "$results/env.log" | head -n 40; fi

# --- Configure and build ---------------------------------------------------------------------
targets=(kernels_compressor_test kernels_aggregation_test kernels_test emulated_device_test dtsim
         dtsim_kernels_bench dtsim_nccl_bench dtsim_emulated_bench)
built=0
# scripts/torch2.sh's CMake options (scripts/torch2-config.sh), warnings not fatal unless
# GPU_CHECK_WERROR=ON. Without PyTorch, CMake finds Debian's LibTorch or .devdeps'.
torch2_cmake_args "$root" "$torch_python"
configure() {  # configure STEP [CMAKE ARGS...]
  local name=$1
  shift
  step "$name" 120 cmake -S . -B "$build" "${TORCH2_CMAKE_ARGS[@]}" "-DDTSIM_WERROR=${GPU_CHECK_WERROR:-OFF}" "$@"
}
# build STEP TIMEOUT: the targets, on with the others when one fails (-k 0: each later
# step runs if its own binary was built); notes the warnings (errors here, not there).
build_targets() {
  step "$1" "$2" ninja -C "$build" -k 0 -j "$jobs" "${targets[@]}"
  local rc=$?
  [ "$dry_run" = 0 ] || return "$rc"
  local warnings
  warnings=$(grep -c 'warning:' "$results/$1.log" 2>/dev/null)
  [ "${warnings:-0}" = 0 ] || note_last "${warnings} compiler warnings (see $1.log)"
  if grep -q 'abi:cxx11' "$results/$1.log" 2>/dev/null; then
    say "    diagnosis: std::string ABI mismatch between PyTorch and the .devdeps libraries (see the warning above)"
  fi
  return "$rc"
}
if configure configure; then
  [ "$dry_run" = 1 ] || grep -E '^-- dtsim:' "$results/configure.log" | sed 's/^/    /'
  if [ "$dry_run" = 0 ] && [ "$cuda" = 1 ] && ! grep -q 'CUDA build: ON' "$results/configure.log"; then
    fail_last "CMake found a LibTorch without CUDA (see configure.log): the GPU paths are not compiled in"
  fi
  built=1
  # The Gloo backend compiles c10d's ProcessGroupGloo.hpp against the Gloo headers found
  # (PyTorch's, or Debian's from .devdeps, older than the Gloo inside PyTorch). Should
  # that fail, everything that links dtsim_comm fails with it: build again without it,
  # since nothing on the GPU machine needs Gloo. build.log keeps the first build's errors.
  if ! build_targets build 330 && [ "$dry_run" = 0 ] && grep -q 'FAILED: .*gloo\.cpp\.o' "$results/build.log"; then
    note_last "the Gloo backend did not compile against this LibTorch: built again without it (build-no-gloo)"
    configure configure-no-gloo -DDTSIM_GLOO=OFF && build_targets build-no-gloo 240
  fi
fi
[ "$dry_run" = 1 ] && built=1
# Which OpenMP runtime(s) a test binary loads (cmake/DtsimDeps.cmake links the one
# libtorch_cpu names; a wheel's renamed copy next to the system's would show twice).
if [ "$dry_run" = 0 ] && [ -x "$build/tests/kernels_test" ]; then
  { grep -E 'OpenMP runtime' "$results/configure.log"; ldd "$build/tests/kernels_test" | grep -Ei 'omp'; } \
    >"$results/openmp.log" 2>&1 || true
  sed 's/^/    /' "$results/openmp.log"
fi

# has BINARY: built, and up to date with the last configuration? (a dry run pretends so)
has() {
  [ "$dry_run" = 1 ] && return 0
  [ -x "$build/$1" ] && ninja -C "$build" -n "$(basename "$1")" 2>/dev/null | grep -q 'no work to do'
}

# --- Tests -----------------------------------------------------------------------------------
# gtest_check NAME: the cases that skipped (GoogleTest's JSON says "SKIPPED"). In CUDA
# mode a skipped case means the C++ side saw no device: a failure. Without CUDA they are
# expected, and listed.
gtest_check() {
  [ "$dry_run" = 0 ] && [ -f "$results/$1.json" ] || return 0
  local skipped
  skipped=$(python3 - "$results/$1.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print(" ".join(f"{s['name']}.{t['name']}" for s in doc.get("testsuites", []) for t in s.get("testsuite", [])
               if t.get("result") == "SKIPPED"))
EOF
)
  [ -n "$skipped" ] || return 0
  if [ "$cuda" = 1 ]; then  # only the *Cuda suites must run (EmulatedDevice.CudaWithout... skips on a GPU)
    skipped=$(tr ' ' '\n' <<<"$skipped" | grep -E '^[^.]*Cuda[^.]*\.' | paste -sd ' ')
    [ -z "$skipped" ] || fail_last "CUDA cases skipped although the machine has a GPU: $skipped"
  else
    note_last "skipped (no CUDA): $skipped"
  fi
}

run_gtest() {  # run_gtest NAME TIMEOUT BINARY FILTER
  if ! has "tests/$3"; then skip "$1" "tests/$3 was not built (see build.log)"; return; fi
  step "$1" "$2" "$build/tests/$3" "--gtest_filter=$4" "--gtest_output=json:$results/$1.json"
  # tests/test_main.cpp exits 77 when every case it ran skipped: without CUDA, what the
  # *Cuda filters are expected to do (gtest_check lists them); with CUDA, gtest_check fails it.
  if [ "$?" = 77 ] && [ "$cuda" = 0 ]; then
    local name status dt note
    IFS='|' read -r name status dt note <<<"${summary[-1]}"
    summary[-1]="$name|ok|$dt|every case skipped (exit 77)"
    say "[$name] ok: every case skipped (exit 77), as expected without CUDA"
  fi
  gtest_check "$1"
}

# run_bench NAME TIMEOUT BINARY ARGS...: a benchmark step, skipped if BINARY was not built.
run_bench() {
  local name=$1 limit=$2 binary=$3
  shift 3
  if ! has "bench/$binary"; then skip "$name" "bench/$binary was not built (see build.log)"; return 1; fi
  step "$name" "$limit" "$build/bench/$binary" "$@"
}

if [ "$built" = 1 ]; then
  run_gtest test-compressor-cuda 90 kernels_compressor_test 'CompressorCuda.*'
  run_gtest test-aggregation-cuda 90 kernels_aggregation_test 'AggregationCuda.*'
  run_gtest test-flatten-cuda 60 kernels_test 'TensorBufferCuda.*:Build.*'
  run_gtest test-emulated-device 180 emulated_device_test '*'
else
  for s in test-compressor-cuda test-aggregation-cuda test-flatten-cuda test-emulated-device; do
    skip "$s" "the build failed"
  done
fi

# --- Benchmarks ------------------------------------------------------------------------------
if [ "$built" = 0 ]; then
  for s in bench-kernels bench-nccl bench-emulated-cuda bench-emulated-cpu; do skip "$s" "the build failed"; done
else
  if [ "$cuda" = 1 ]; then
    run_bench bench-kernels 120 dtsim_kernels_bench --benchmark_filter=Cuda \
      "--benchmark_out=$results/kernels_cuda.json" --benchmark_out_format=json
    if [ "$dry_run" = 0 ] && has bench/dtsim_kernels_bench && ! grep -q '"BM_Cuda' "$results/kernels_cuda.json" 2>/dev/null; then
      fail_last "no BM_Cuda* benchmark ran (C++ saw no CUDA device?)"
    fi
  else
    skip bench-kernels "no CUDA ($why_no_cuda): the BM_Cuda* benchmarks register only with a device"
  fi
  # Runs everywhere: without NCCL/CUDA it writes {"skipped": why} and says so.
  run_bench bench-nccl 90 dtsim_nccl_bench -b 8 -e 1G -f 2 --json "$results/nccl_allreduce.json"
  if [ "$dry_run" = 0 ] && grep -q '"skipped"' "$results/nccl_allreduce.json" 2>/dev/null; then
    why=$(grep -o '"skipped": *"[^"]*"' "$results/nccl_allreduce.json" | sed 's/"skipped": *//; s/"//g')
    if [ "$cuda" = 1 ]; then fail_last "NCCL benchmark skipped on a CUDA machine: $why"; else note_last "skipped inside: $why"; fi
  fi
  if [ "$cuda" = 1 ]; then
    run_bench bench-emulated-cuda 120 dtsim_emulated_bench scenarios/emulated_resnet20_choco64.json \
      --device cuda --json "$results/emulated_cuda.json"
  else
    skip bench-emulated-cuda "no CUDA ($why_no_cuda)"
  fi
  # The same scenario on this machine's CPU, for the ratio.
  run_bench bench-emulated-cpu 120 dtsim_emulated_bench scenarios/emulated_resnet20_choco64.json \
    --device cpu --json "$results/emulated_cpu.json"
fi

# --- Summary ---------------------------------------------------------------------------------
failed=0 ok=0 skipped=0
{
  echo "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $commit, cuda mode $cuda${why_no_cuda:+ ($why_no_cuda)}, $(( $(date +%s) - start )) s"
  for row in "${summary[@]}"; do
    IFS='|' read -r name status dt note <<<"$row"
    printf '%-22s %-8s %5s s  %s\n' "$name" "$status" "$dt" "$note"
  done
} >"$results/summary.txt"
python3 - "$results/summary.json" "$commit" "$cuda" "$why_no_cuda" "$torch_version" "${summary[@]}" <<'EOF' || true
import json, sys
out, commit, cuda, why, torch = sys.argv[1:6]
steps = [dict(zip(("step", "status", "seconds", "note"), row.split("|", 3))) for row in sys.argv[6:]]
for s in steps: s["seconds"] = int(s["seconds"])
json.dump({"commit": commit, "cuda": cuda == "1", "no_cuda_reason": why, "torch": torch, "steps": steps},
          open(out, "w"), indent=2)
EOF
for row in "${summary[@]}"; do
  case "$row" in
    *"|ok|"*) ok=$((ok + 1)) ;;
    *"|FAILED|"*) failed=$((failed + 1)) ;;
    *) skipped=$((skipped + 1)) ;;
  esac
done
echo
sed 's/^/  /' "$results/summary.txt"
say "$ok ok, $failed failed, $skipped skipped; results in $results"
[ "$failed" = 0 ]
