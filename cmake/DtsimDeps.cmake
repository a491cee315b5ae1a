# Third-party dependencies, all from Debian's packages (scripts/install-deps.sh), or from
# PyTorch's bundled LibTorch plus ../shared/device's bundle on a GPU machine.

find_package(Torch REQUIRED)
find_package(fmt REQUIRED)
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
if(_aten_openmp)
  get_target_property(_torch_cpu_location torch_cpu IMPORTED_LOCATION)
  get_target_property(_torch_cpu_configs torch_cpu IMPORTED_CONFIGURATIONS)
  foreach(_config IN LISTS _torch_cpu_configs)
    if(NOT _torch_cpu_location)
      get_target_property(_torch_cpu_location torch_cpu IMPORTED_LOCATION_${_config})
    endif()
  endforeach()
  # The OpenMP library libtorch_cpu names (readelf), found next to it or in a wheel's
  # vendored-library folder; a plain libgomp.so.1 that is not there is the system's.
  set(_gomp_needed "libgomp.so.1")
  find_program(DTSIM_READELF readelf)
  if(_torch_cpu_location AND DTSIM_READELF)
    execute_process(COMMAND ${DTSIM_READELF} -d ${_torch_cpu_location} OUTPUT_VARIABLE _torch_cpu_dynamic
                    ERROR_QUIET)
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

# c10d's Gloo: Debian's libtorch defines USE_C10D_GLOO on its torch_cpu target.
# PyTorch's bundled LibTorch may define it without shipping Gloo's headers: need both.
set(DTSIM_HAVE_GLOO OFF)
get_target_property(_torch_defs torch_cpu INTERFACE_COMPILE_DEFINITIONS)
# LibTorch's own Gloo headers first (they match the Gloo inside it); CMAKE_PREFIX_PATH
# (on a GPU machine, .devdeps' older Debian Gloo) would otherwise be searched before HINTS.
find_path(DTSIM_GLOO_INCLUDE_DIR gloo/algorithm.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
find_path(DTSIM_GLOO_INCLUDE_DIR gloo/algorithm.h)
# DTSIM_GLOO=OFF leaves the backend out even so (scripts/gpu-check.sh retries that way
# should c10d's Gloo header not compile against the Gloo headers found).
if(DTSIM_GLOO AND _torch_defs MATCHES "USE_C10D_GLOO" AND DTSIM_GLOO_INCLUDE_DIR)
  set(DTSIM_HAVE_GLOO ON)
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
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper (H100/H200), the GPU machines we are lent
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flag for nvcc; the .cu files need only C++17
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
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
  find_library(DTSIM_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)
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
