#!/usr/bin/env bash
# scripts/torch2.sh [--no-test]: dtsim built and tested against PyTorch 2.x (`make test-torch2`).
#
# The second build configuration beside Debian's LibTorch 1.13 (`make test`): the LibTorch
# inside PyPI's `torch` wheel, the one a GPU machine has (CUDA-enabled; here it runs on the
# CPU). Steps, each timed:
#   venv       .venv-torch2/ with torch==$TORCH2_VERSION from PyPI (several GB of nvidia-*
#              wheels come with it); kept, and reused while it holds that version
#   configure  build/torch2 against torch.utils.cmake_prefix_path, with exactly the CMake
#              options scripts/gpu-check.sh uses (scripts/torch2-config.sh)
#   build      every target, the CUDA sources included when nvcc is found (/usr/local/cuda)
#   test       ctest in build/torch2: the whole suite on the CPU (CUDA cases skip without a GPU)
# The Debian-only dependencies (fmt, nlohmann-json, CLI11, GoogleTest, Benchmark) are the
# system's (scripts/install-deps.sh). Exit status: that of the first step that failed.
#
# Environment: TORCH2_VERSION (default the pinned one below), TORCH2_VENV (.venv-torch2),
# TORCH2_BUILD_DIR (build/torch2), TORCH2_JOBS (nproc), TORCH2_PYTHON (a python with torch
# already: no venv).
set -euo pipefail

# PyTorch 2.15.0 (cu132 wheel, C++11 ABI): the newest on PyPI when this was written
# (bench/results/torch2.md).
version=${TORCH2_VERSION:-2.15.0}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=${TORCH2_VENV:-.venv-torch2}
build=${TORCH2_BUILD_DIR:-build/torch2}
jobs=${TORCH2_JOBS:-$(nproc)}
run_tests=1
for arg in "$@"; do
  case "$arg" in
    --no-test) run_tests=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "usage: scripts/torch2.sh [--no-test]" >&2; exit 2 ;;
  esac
done
# shellcheck source=scripts/torch2-config.sh
. "$root/scripts/torch2-config.sh"

say() { echo "torch2: $*"; }
times=()
timed() {  # timed NAME COMMAND...: runs COMMAND, records its wall time
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  times+=("$name $(( $(date +%s) - t0 )) s$([ "$rc" = 0 ] || echo " (failed, exit $rc)")")
  return "$rc"
}
report() {
  say "wall times: $(IFS=,; echo "${times[*]}" | sed 's/,/, /g')"
}
trap report EXIT

# --- The venv --------------------------------------------------------------------------------
make_venv() {
  if [ -n "${TORCH2_PYTHON:-}" ]; then
    python=$TORCH2_PYTHON
    return 0
  fi
  python=$venv/bin/python
  if [ -x "$python" ] && [ "$("$python" -c 'import numpy, torch;print(torch.__version__.split("+")[0])' 2>/dev/null)" = "$version" ]; then
    say "$venv has torch $version and numpy"
    return 0
  fi
  if [ ! -x "$python" ]; then
    python3 -m venv "$venv" || {
      say "python3 -m venv failed: on Debian, apt-get install python3-venv (scripts/install-deps.sh --with-venv)"
      return 1
    }
  fi
  # NumPy too: the tests against PyTorch run its powerSGD_hook, which draws from NumPy.
  say "installing torch==$version and numpy into $venv (about 5 GB with torch's nvidia-* wheels)"
  "$python" -m pip install --no-input --disable-pip-version-check "torch==$version" numpy
}
timed venv make_venv
torch2_facts "$python" || { say "$python cannot import torch"; exit 1; }
say "torch $torch_version, CUDA ${torch_cuda:-none (CPU build)}, C++11 ABI $torch_abi, CMake files in $torch_prefix"
if [ "$torch_abi" != 1 ]; then
  say "this torch uses the pre-C++11 std::string ABI; Debian's fmt, GoogleTest and Benchmark use the C++11"
  say "one, so dtsim cannot link both. PyPI's wheels use the C++11 ABI from torch 2.7 on: pick one of those."
  exit 1
fi

# --- Configure, build, test ------------------------------------------------------------------
torch2_cmake_args "$root" "$python"
timed configure cmake -S . -B "$build" "${TORCH2_CMAKE_ARGS[@]}"
timed build cmake --build "$build" -j "$jobs"
if [ "$run_tests" = 1 ]; then
  # The tests against PyTorch itself must find this venv's torch, not skip.
  DTSIM_TEST_REQUIRE_TORCH_PYTHON=1 timed test ctest --test-dir "$build" -j "$jobs" --output-on-failure
fi
