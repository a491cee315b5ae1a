#!/usr/bin/env bash
# Installs dtsim's build and run dependencies from Debian's packages, only those missing.
# Idempotent: a second run installs nothing. Needs root (or sudo) when something is missing.
# python3-torch (the same PyTorch 1.13, for Python) is installed too: the tests hold
# dtsim's DDP hooks to PyTorch's own (tests/pytorch/ddp_hooks_reference.py) and check
# scripts/export_model.py's exports. --with-python-torch is accepted for older scripts.
# --with-simgrid also installs libsimgrid-dev (SimGrid 3.32), which only
# bench/dtsim_simgrid_compare needs: CMake builds that tool when it finds SimGrid.
# --with-venv also installs python3-venv, for scripts/torch2.sh's virtual environment
# (`make test-torch2`).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache
  libtorch-dev libgloo-dev            # LibTorch 1.13 (CPU) with c10d's Gloo
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev dataset-fashion-mnist    # Fashion-MNIST IDX files (gzip) for the mlp and cnn workloads
  libopenblas0-serial                 # LibTorch's BLAS: OpenBLAS instead of the reference BLAS (17x faster GEMM)
  python3-torch                       # PyTorch itself, the reference for the DDP hooks' tests
  fortunes                            # about 2.5 MB of English text: the gpt workload's default corpus (data text)
)

for arg in "$@"; do
  case "$arg" in
    --with-python-torch) ;;  # installed by default now
    --with-simgrid) packages+=(libsimgrid-dev) ;;
    --with-venv) packages+=(python3-venv) ;;
    *) echo "install-deps: unknown option $arg (expected --with-python-torch, --with-simgrid or --with-venv)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
