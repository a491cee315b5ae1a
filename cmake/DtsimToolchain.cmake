# Compiler settings shared by every dtsim target: ccache, warnings, sanitizers.

set(DTSIM_CCACHE_FOUND OFF)
if(DTSIM_CCACHE)
  find_program(DTSIM_CCACHE_PROGRAM ccache)
  if(DTSIM_CCACHE_PROGRAM)
    # Precompiled headers need these sloppiness settings to be cacheable.
    set(_launcher /usr/bin/env
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
        ${DTSIM_CCACHE_PROGRAM})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${_launcher})
    set(DTSIM_CCACHE_FOUND ON)
  endif()
endif()

if(DTSIM_FUZZ)  # libFuzzer's coverage instrumentation in every target (tests/fuzz/README.md)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DTSIM_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(DTSIM_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# dtsim_target_defaults(target): warnings (as errors) for dtsim's own code, include root.
function(dtsim_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                               -Wno-missing-field-initializers>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${DTSIM_WERROR}>>:-Werror>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()
