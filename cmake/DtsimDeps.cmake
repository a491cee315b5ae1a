# Third-party dependencies, all from Debian's packages (scripts/install-deps.sh), or from
# PyTorch's bundled LibTorch plus ../shared/device's bundle on a GPU machine.

# PyTorch 2.x's CUDA LibTorch (pip's torch) enables CUDA inside find_package(Torch)
# (Caffe2's public/cuda.cmake): it sets CMAKE_CUDA_STANDARD to CMAKE_CXX_STANDARD when
# unset (20, for which CMake 3.25 knows no nvcc flag: the .cu files need only C++17), adds
# nvcc -gencode flags for TORCH_CUDA_ARCH_LIST (unset: it runs a program to find this
# machine's GPUs, which fails where there is none), and sets CMAKE_CUDA_ARCHITECTURES to
# OFF. So: C++17 for CUDA, TORCH_CUDA_ARCH_LIST from CMAKE_CUDA_ARCHITECTURES (90 -> 9.0),
# and CMAKE_CUDA_ARCHITECTURES put back afterwards. Debian's CPU LibTorch does none of this.
if(NOT DEFINED CMAKE_CUDA_STANDARD)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flag for nvcc
endif()
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper (H100/H200), the GPU machines we are lent
endif()
set(DTSIM_CUDA_ARCHITECTURES ${CMAKE_CUDA_ARCHITECTURES})
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "")
  foreach(_arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX REPLACE "-(real|virtual)$" "" _arch "${_arch}")
    string(REGEX REPLACE "^([0-9]+)([0-9])([af]?)$" "\\1.\\2\\3" _arch "${_arch}")
    list(APPEND TORCH_CUDA_ARCH_LIST ${_arch})
  endforeach()
endif()
# pip's torch: CMAKE_PREFIX_PATH=torch.utils.cmake_prefix_path (<torch>/share/cmake)
# finds its TorchConfig.cmake, which then looks for libtorch and libc10 with find_library,
# whose default paths come before <torch>/lib: a system LibTorch (Debian's, here) would be
# linked in their place, beside the wheel's libtorch_cpu. Torch_ROOT is searched first.
if(NOT DEFINED Torch_ROOT)
  foreach(_prefix IN LISTS CMAKE_PREFIX_PATH)
    if(EXISTS "${_prefix}/Torch/TorchConfig.cmake" AND EXISTS "${_prefix}/../../lib")
      get_filename_component(Torch_ROOT "${_prefix}/../.." ABSOLUTE)
      break()
    endif()
  endforeach()
endif()
find_package(Torch REQUIRED)
set(CMAKE_CUDA_ARCHITECTURES ${DTSIM_CUDA_ARCHITECTURES})
find_package(fmt REQUIRED)
# PyTorch's wheels ship fmt's headers (fmt 12 in 2.15) in torch/include, which the
# compiler searches (-isystem) before the system's fmt in /usr/include: dtsim would be
# compiled against one fmt and linked with another (Debian's libfmt.so.9). A build-tree
# folder holding only a link to the fmt that find_package found is searched first.
set(DTSIM_FMT_INCLUDE_FIRST "")
foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
  if(EXISTS "${_dir}/fmt/format.h")
    get_target_property(_fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
    find_path(DTSIM_FMT_INCLUDE_DIR fmt/format.h PATHS ${_fmt_includes} NO_DEFAULT_PATH)
    if(DTSIM_FMT_INCLUDE_DIR AND NOT DTSIM_FMT_INCLUDE_DIR STREQUAL _dir)
      set(DTSIM_FMT_INCLUDE_FIRST "${CMAKE_BINARY_DIR}/dtsim_fmt_include")
      file(MAKE_DIRECTORY "${DTSIM_FMT_INCLUDE_FIRST}")
      file(CREATE_LINK "${DTSIM_FMT_INCLUDE_DIR}/fmt" "${DTSIM_FMT_INCLUDE_FIRST}/fmt" SYMBOLIC)
      include_directories(BEFORE SYSTEM "${DTSIM_FMT_INCLUDE_FIRST}")
      message(STATUS "dtsim: LibTorch ships fmt headers (${_dir}/fmt): fmt ${fmt_VERSION}'s from "
                     "${DTSIM_FMT_INCLUDE_DIR} come first")
    endif()
    break()
  endif()
endforeach()
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)

# OpenMP. at::parallel_for is a header template: in a LibTorch built on OpenMP (ATen's
# Config.h: AT_PARALLEL_OPENMP) it runs the loop on the OpenMP team only where the
# calling code is compiled with OpenMP (Parallel-inl.h tests _OPENMP); compiled without,
# it calls the body once, on the calling thread, so every "parallel" CPU kernel of dtsim
# would be serial whatever at::set_num_threads says (tests: Build.ParallelForRunsOnSeveral
# Threads). dtsim_use_torch compiles with -fopenmp and links the OpenMP library that
# libtorch_cpu names, found next to it (PyTorch's wheels may bundle a renamed libgomp, or
# Intel's libiomp5 with its GOMP entry points), else the compiler's libgomp. Two runtimes
# would not share at::set_num_threads' team size. (A renamed libgomp keeps the SONAME
# libgomp.so.1, so a binary linked with it asks for libgomp.so.1 and may load the
# system's; that copy, loaded first, then serves libtorch_cpu's calls too: one team still.
# scripts/gpu-check.sh logs what a test binary loads, openmp.log.)
set(DTSIM_OPENMP_RUNTIME "")
find_file(DTSIM_ATEN_CONFIG ATen/Config.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
if(DTSIM_ATEN_CONFIG)
  file(STRINGS ${DTSIM_ATEN_CONFIG} _aten_openmp REGEX "define AT_PARALLEL_OPENMP 1")
endif()
# libtorch_cpu's file and the libraries it names (readelf -d): for OpenMP and Gloo below.
get_target_property(_torch_cpu_location torch_cpu IMPORTED_LOCATION)
get_target_property(_torch_cpu_configs torch_cpu IMPORTED_CONFIGURATIONS)
foreach(_config IN LISTS _torch_cpu_configs)
  if(NOT _torch_cpu_location)
    get_target_property(_torch_cpu_location torch_cpu IMPORTED_LOCATION_${_config})
  endif()
endforeach()
set(_torch_cpu_dynamic "")
find_program(DTSIM_READELF readelf)
if(_torch_cpu_location AND DTSIM_READELF)
  execute_process(COMMAND ${DTSIM_READELF} -d ${_torch_cpu_location} OUTPUT_VARIABLE _torch_cpu_dynamic
                  ERROR_QUIET)
endif()
if(_aten_openmp)
  # The OpenMP library libtorch_cpu names, found next to it or in a wheel's
  # vendored-library folder; a plain libgomp.so.1 that is not there is the system's.
  set(_gomp_needed "libgomp.so.1")
  if(_torch_cpu_dynamic)
    string(REGEX MATCH "\\[(lib[gi]?omp[^]]*)\\]" _match "${_torch_cpu_dynamic}")
    if(CMAKE_MATCH_1)
      set(_gomp_needed ${CMAKE_MATCH_1})
    endif()
  endif()
  if(_torch_cpu_location)
    get_filename_component(_torch_lib_dir "${_torch_cpu_location}" DIRECTORY)
    find_file(DTSIM_TORCH_OPENMP ${_gomp_needed} PATHS ${_torch_lib_dir} ${_torch_lib_dir}/../../torch.libs
              NO_DEFAULT_PATH)
  endif()
  if(DTSIM_TORCH_OPENMP)
    set(DTSIM_OPENMP_RUNTIME ${DTSIM_TORCH_OPENMP})
  elseif(_gomp_needed STREQUAL "libgomp.so.1")
    find_package(OpenMP COMPONENTS CXX)
    if(OpenMP_CXX_FOUND)
      set(DTSIM_OPENMP_RUNTIME ${OpenMP_CXX_LIBRARIES})
    endif()
  endif()
  if(NOT DTSIM_OPENMP_RUNTIME)
    message(WARNING "dtsim: LibTorch uses OpenMP (${_gomp_needed}) but dtsim found no such runtime to link: "
                    "its CPU kernels will run on one thread")
  endif()
endif()

# Is the LibTorch we found a CUDA build? (Debian's 1.13 is CPU-only; PyTorch's 2.x on a
# GPU machine is not.) The GPU code path is compiled in only then.
set(DTSIM_TORCH_HAS_CUDA OFF)
if(TARGET torch_cuda OR TARGET c10_cuda OR TORCH_CUDA_LIBRARIES)
  set(DTSIM_TORCH_HAS_CUDA ON)
endif()

# A wheel's libtorch_cuda finds its CUDA libraries (cudart, nvrtc, NCCL, ... from the
# nvidia-* wheels, newer than the local toolkit: 13.2 against 13.0 here) through its RPATH
# ($ORIGIN/../../nvidia/...). dtsim's binaries also link the local toolkit's cudart and
# nvrtc (TorchConfig's targets, the CUDA kernels), so their RPATH names /usr/local/cuda/lib,
# whose libnccl.so.2 is older than the one libtorch_cuda needs: the link fails (undefined
# ncclCommGrow ...), and a run would load the toolkit's libraries under libtorch_cuda. The
# wheel's folders go first: -rpath-link for the link, the build RPATH for a run. (A CUDA
# program built against 13.0 runs on the 13.2 runtime; the reverse is not promised.)
set(DTSIM_TORCH_CUDA_LIB_DIRS "")
if(DTSIM_TORCH_HAS_CUDA AND TARGET torch_cuda AND DTSIM_READELF)
  get_target_property(_torch_cuda_location torch_cuda IMPORTED_LOCATION)
  foreach(_config IN LISTS _torch_cpu_configs)
    if(NOT _torch_cuda_location)
      get_target_property(_torch_cuda_location torch_cuda IMPORTED_LOCATION_${_config})
    endif()
  endforeach()
  if(_torch_cuda_location)
    execute_process(COMMAND ${DTSIM_READELF} -d ${_torch_cuda_location} OUTPUT_VARIABLE _torch_cuda_dynamic
                    ERROR_QUIET)
    string(REGEX MATCH "R(UN)?PATH\\)[^[]*\\[([^]]*)\\]" _match "${_torch_cuda_dynamic}")
    get_filename_component(_torch_cuda_dir "${_torch_cuda_location}" DIRECTORY)
    string(REPLACE ":" ";" _rpath "${CMAKE_MATCH_2}")
    foreach(_dir IN LISTS _rpath)
      string(REPLACE "$ORIGIN" "${_torch_cuda_dir}" _dir "${_dir}")
      get_filename_component(_dir "${_dir}" ABSOLUTE)
      if(IS_DIRECTORY "${_dir}" AND NOT _dir STREQUAL _torch_cuda_dir)
        list(APPEND DTSIM_TORCH_CUDA_LIB_DIRS "${_dir}")
      endif()
    endforeach()
  endif()
  if(DTSIM_TORCH_CUDA_LIB_DIRS)
    string(REPLACE ";" ":" _dirs "${DTSIM_TORCH_CUDA_LIB_DIRS}")
    add_link_options("LINKER:-rpath-link,${_dirs}")
    list(PREPEND CMAKE_BUILD_RPATH ${DTSIM_TORCH_CUDA_LIB_DIRS})
    message(STATUS "dtsim: libtorch_cuda's CUDA libraries first: ${DTSIM_TORCH_CUDA_LIB_DIRS}")
  endif()
endif()

# c10d's Gloo: LibTorch defines USE_C10D_GLOO on its torch_cpu target (Debian's 1.13 and
# PyTorch's wheels alike), and dtsim needs Gloo headers that match the Gloo c10d was built
# with: LibTorch's own, or the system's when libtorch_cpu links the system's libgloo
# (Debian: libgloo-dev). PyTorch's wheels link Gloo statically and ship no Gloo headers
# (checked with 2.15): Debian's older ones do not compile against their c10d
# (ProcessGroupGloo.hpp overrides gloo::rendezvous::Store methods Debian's Gloo lacks),
# and would not match the Gloo inside libtorch_cpu if they did, so the backend is left
# out there and the live tests that need it skip.
set(DTSIM_HAVE_GLOO OFF)
set(DTSIM_GLOO_WHY "")
get_target_property(_torch_defs torch_cpu INTERFACE_COMPILE_DEFINITIONS)
find_path(DTSIM_GLOO_INCLUDE_DIR gloo/algorithm.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
if(NOT DTSIM_GLOO_INCLUDE_DIR AND _torch_cpu_dynamic MATCHES "\\[libgloo\\.so")
  find_path(DTSIM_GLOO_INCLUDE_DIR gloo/algorithm.h)
endif()
if(NOT DTSIM_GLOO)
  set(DTSIM_GLOO_WHY "DTSIM_GLOO=OFF")
elseif(NOT _torch_defs MATCHES "USE_C10D_GLOO")
  set(DTSIM_GLOO_WHY "LibTorch is built without c10d's Gloo")
elseif(NOT DTSIM_GLOO_INCLUDE_DIR)
  set(DTSIM_GLOO_WHY "no Gloo headers matching LibTorch's Gloo (none in LibTorch, and it does not link the system's libgloo)")
else()
  set(DTSIM_HAVE_GLOO ON)
endif()
set(DTSIM_GLOO_WHY_NOTE "")
if(DTSIM_GLOO_WHY)
  set(DTSIM_GLOO_WHY_NOTE " (${DTSIM_GLOO_WHY})")
endif()

# nvcc: every build that finds it compiles the CUDA kernels, even with a CPU LibTorch.
set(DTSIM_HAVE_NVCC OFF)
if(DTSIM_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)  # (a CUDA LibTorch has enabled it already; the standard and architectures: above)
    set(DTSIM_HAVE_NVCC ON)
  endif()
endif()

# One precompiled ATen header for the libraries, the CLI and the benchmarks: ATen's
# header otherwise dominates the build (about 6 s per translation unit here), and a
# header per target cost about 22 s of CPU each, 14 times. dtsim_torch_pch compiles it
# with the flags every dtsim target shares (warnings, LibTorch's and fmt's definitions);
# the macros a target adds do not appear in ATen, so GCC accepts the header for it.
# Should a compiler still find it unusable for a target (-Winvalid-pch), that target
# parses ATen itself instead of failing the build. (The tests share their own,
# tests/CMakeLists.txt.)
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/dtsim_torch_pch.cpp
     CONTENT "// The translation unit that carries dtsim's shared precompiled ATen header.\n")
add_library(dtsim_torch_pch OBJECT ${CMAKE_BINARY_DIR}/dtsim_torch_pch.cpp)
dtsim_target_defaults(dtsim_torch_pch)
target_link_libraries(dtsim_torch_pch PRIVATE ${TORCH_LIBRARIES} fmt::fmt)
if(DTSIM_OPENMP_RUNTIME)
  target_compile_options(dtsim_torch_pch PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fopenmp>)
endif()
target_precompile_headers(dtsim_torch_pch PRIVATE $<$<COMPILE_LANGUAGE:CXX>:<ATen/ATen.h$<ANGLE-R>>)

# dtsim_use_torch(target [OWN_PCH | REUSE_PCH other]): link LibTorch and use a
# precompiled ATen header: the shared one, or (OWN_PCH) one compiled with the target's
# own flags (for flags that change code generation, as the kernels' -ffp-contract=off),
# or another target's (REUSE_PCH).
function(dtsim_use_torch target)
  cmake_parse_arguments(U "OWN_PCH" "REUSE_PCH" "" ${ARGN})
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  if(DTSIM_OPENMP_RUNTIME)  # see above: at::parallel_for is parallel only in OpenMP code
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fopenmp>)
    target_link_libraries(${target} PUBLIC ${DTSIM_OPENMP_RUNTIME})
  endif()
  if(U_OWN_PCH)
    target_precompile_headers(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:<ATen/ATen.h$<ANGLE-R>>)
  else()
    if(NOT U_REUSE_PCH)
      set(U_REUSE_PCH dtsim_torch_pch)
    endif()
    target_precompile_headers(${target} REUSE_FROM ${U_REUSE_PCH})
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-error=invalid-pch>)
  endif()
  if(DTSIM_TORCH_HAS_CUDA)
    target_compile_definitions(${target} PUBLIC DTSIM_TORCH_CUDA=1)
  endif()
endfunction()

# c10d's TCPStore (the live rendezvous of every backend): in every LibTorch built with
# distributed support.
set(DTSIM_HAVE_C10D OFF)
find_path(DTSIM_C10D_INCLUDE_DIR torch/csrc/distributed/c10d/TCPStore.hpp HINTS ${TORCH_INCLUDE_DIRS})
if(DTSIM_C10D_INCLUDE_DIR)
  set(DTSIM_HAVE_C10D ON)
endif()

# NCCL (the live GPU backend, comm/nccl.cpp): nccl.h and libnccl from PyTorch's
# nvidia-nccl package (preferred when present, so one NCCL is loaded) or the CUDA toolkit
# (/usr/local/cuda), plus the CUDA runtime and c10d's TCPStore for the rendezvous.
# Compiled in when all are found (DTSIM_HAVE_NCCL); it moves CUDA tensors only when the
# LibTorch is a CUDA build (DTSIM_TORCH_CUDA) and otherwise refuses to start.
set(DTSIM_HAVE_NCCL OFF)
if(DTSIM_CUDA)
  find_package(CUDAToolkit QUIET)
  set(_nccl_hints "${TORCH_INSTALL_PREFIX}/../nvidia/nccl" $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT} /usr/local/cuda)
  find_path(DTSIM_NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
  find_library(DTSIM_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)
  if(CUDAToolkit_FOUND AND DTSIM_NCCL_INCLUDE_DIR AND DTSIM_NCCL_LIBRARY AND DTSIM_HAVE_C10D)
    set(DTSIM_HAVE_NCCL ON)
  endif()
endif()
message(STATUS "dtsim: c10d TCPStore: ${DTSIM_HAVE_C10D}, NCCL backend: ${DTSIM_HAVE_NCCL} (${DTSIM_NCCL_LIBRARY})")

# dtsim_live_backends(target): what compiles the live backends in (DTSIM_HAVE_C10D,
# DTSIM_HAVE_GLOO, DTSIM_HAVE_NCCL, their headers and libraries), for dtsim_comm and the
# GPU code's compile check.
function(dtsim_live_backends target)
  if(DTSIM_HAVE_C10D)
    target_compile_definitions(${target} PRIVATE DTSIM_HAVE_C10D=1)
  endif()
  if(DTSIM_HAVE_GLOO)
    target_compile_definitions(${target} PRIVATE DTSIM_HAVE_GLOO=1)
    target_include_directories(${target} SYSTEM PRIVATE ${DTSIM_GLOO_INCLUDE_DIR})
  endif()
  if(DTSIM_HAVE_NCCL)  # NCCL's C API and the CUDA runtime
    target_compile_definitions(${target} PRIVATE DTSIM_HAVE_NCCL=1)
    target_include_directories(${target} SYSTEM PRIVATE ${DTSIM_NCCL_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE ${DTSIM_NCCL_LIBRARY} CUDA::cudart)
  endif()
endfunction()
