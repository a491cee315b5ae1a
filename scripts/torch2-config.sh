# scripts/torch2-config.sh: sourced (not run) by scripts/torch2.sh and scripts/gpu-check.sh,
# so that the CPU build against PyTorch 2.x and the GPU check configure dtsim alike.
#
#   torch2_python VENV       prints the Python whose `import torch` works: $TORCH2_PYTHON if
#                            set, else python3 (a GPU machine's system-wide PyTorch), else
#                            VENV/bin/python (scripts/torch2.sh's); status 1 if none.
#   torch2_facts PYTHON      sets torch_version, torch_cuda (empty: a CPU build), torch_abi
#                            (1: the C++11 std::string ABI, as Debian's libraries), torch_prefix
#                            (torch.utils.cmake_prefix_path); status 1 if PYTHON has no torch.
#   torch2_cmake_args ROOT   sets the array TORCH2_CMAKE_ARGS: the CMake options of this
#                            configuration (after torch2_facts). Debian-only dependencies
#                            (fmt, nlohmann-json, CLI11, GoogleTest, Benchmark, Gloo) come
#                            from the system, or from ROOT/.devdeps/usr where that exists
#                            (../shared/device/README.md).

torch2_python() {
  local venv=$1 py
  for py in "${TORCH2_PYTHON:-}" python3 "$venv/bin/python"; do
    [ -n "$py" ] || continue
    # find_spec, not an import: importing torch takes seconds, torch2_facts does it once.
    if "$py" -c 'import importlib.util,sys;sys.exit(importlib.util.find_spec("torch") is None)' >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
  done
  return 1
}

torch2_facts() {
  local facts
  facts=$("$1" - 2>/dev/null <<'EOF'
import torch, torch.utils
print(torch.__version__)
print(torch.version.cuda or "")
print(int(torch.compiled_with_cxx11_abi()))
print(torch.utils.cmake_prefix_path)
EOF
) || return 1
  { read -r torch_version; read -r torch_cuda; read -r torch_abi; read -r torch_prefix; } <<<"$facts"
}

torch2_cmake_args() {  # torch2_cmake_args ROOT PYTHON
  local root=$1 python=${2:-} prefix=${torch_prefix:-}
  # The tests run from their build directory: the Python they call must be an absolute path.
  case "$python" in
    "") ;;
    /*) ;;
    */*) python="$root/$python" ;;
    *) python=$(command -v "$python" || echo "$python") ;;
  esac
  [ -d "$root/.devdeps/usr" ] && prefix="${prefix:+$prefix;}$root/.devdeps/usr"
  # cmake/DtsimDeps.cmake derives Torch_ROOT and TORCH_CUDA_ARCH_LIST from these, and puts
  # the system's fmt headers before the copy the wheel ships.
  TORCH2_CMAKE_ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$prefix"
                     -DCMAKE_CUDA_ARCHITECTURES=90 -DDTSIM_CUDA=ON -DDTSIM_GLOO=ON
                     -DDTSIM_BUILD_TESTS=ON -DDTSIM_BUILD_BENCH=ON "-DDTSIM_TEST_PYTHON=$python")
}
