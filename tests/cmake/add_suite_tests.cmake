# Run after a test binary is built (tests/CMakeLists.txt, dtsim_test): lists its cases
# and writes CTEST_FILE with one CTest test per GoogleTest suite, named after the suite
# and running the binary once with --gtest_filter=<suite>.*. One process per suite rather
# than per case: every process that links LibTorch spends about 0.75 s starting (dynamic
# symbol binding over LibTorch's ~290 libraries, operator registration), which over 440
# cases was a third of the suite's time.
#
# In: TEST_EXECUTABLE, CTEST_FILE, TEST_LABEL, TEST_WORKING_DIR.
execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE status TIMEOUT 60)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed (${status}): ${errors}")
endif()

set(body "")
string(REPLACE "\n" ";" lines "${listing}")
foreach(line IN LISTS lines)
  # Suite lines start in column 0 and end with '.', before an optional "  # TypeParam = ..." comment.
  if(line MATCHES "^([A-Za-z_][A-Za-z0-9_/]*)\\.( .*)?$")
    set(suite "${CMAKE_MATCH_1}")
    if(suite MATCHES "(^|/)DISABLED_")
      continue()
    endif()
    string(APPEND body
           "add_test([==[${suite}]==] [==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${suite}.*]==])\n"
           "set_tests_properties([==[${suite}]==] PROPERTIES LABELS [==[${TEST_LABEL}]==] "
           "WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==] SKIP_RETURN_CODE 77)\n")
  endif()
endforeach()
if(body STREQUAL "")
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test suites")
endif()
file(WRITE "${CTEST_FILE}" "${body}")
