# Run after a test binary links (tests/CMakeLists.txt, lmtrain_test_binary ... SUITE): lists its
# tests with --gtest_list_tests and writes CTEST_FILE, which registers one ctest entry per test
# suite ("Suite.*", run as --gtest_filter=Suite.*) and sets TEST_LIST to their names.
#   -D TEST_EXECUTABLE=... -D TEST_WORKING_DIR=... -D CTEST_FILE=... -D TEST_LIST=...
execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
                WORKING_DIRECTORY "${TEST_WORKING_DIR}"
                OUTPUT_VARIABLE listing ERROR_VARIABLE listing_error
                RESULT_VARIABLE result TIMEOUT 60)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed (${result}):\n"
                      "${listing}${listing_error}")
endif()
# A suite's line starts in column 0 and ends with '.', or with '.' and a comment
# ("Typed/Suite/0.  # TypeParam = float"); its tests follow, indented.
string(REPLACE ";" "," listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(script "")
set(names "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ ][^ ]*)\\.(  #.*)?$")
    set(suite "${CMAKE_MATCH_1}")
    set(name "${suite}.*")
    list(APPEND names "${name}")
    # A suite whose every test skipped (no GPU, no Python library) reports as skipped; one that
    # ran some tests reports their result, its skipped ones listed in the output.
    string(APPEND script
           "add_test([==[${name}]==] \"${TEST_EXECUTABLE}\" [==[--gtest_filter=${suite}.*]==])\n"
           "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY "
           "\"${TEST_WORKING_DIR}\" SKIP_REGULAR_EXPRESSION [==[\\[  PASSED  \\] 0 tests]==])\n")
  endif()
endforeach()
if(NOT names)
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test suites:\n${listing}")
endif()
string(APPEND script "set(${TEST_LIST} [==[${names}]==])\n")
file(WRITE "${CTEST_FILE}" "${script}")
