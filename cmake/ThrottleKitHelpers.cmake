# Declarative helpers so each directory's CMakeLists is a list of targets.
include_guard(GLOBAL)
include(GNUInstallDirs)

# Which tests a build compiles: a regular expression over a test's labels
# (empty: every test). The sanitizer presets compile only what they run.
set(THROTTLEKIT_TEST_SELECT "" CACHE STRING
  "Build only the tests with a label matching this regex (empty: all)")
option(THROTTLEKIT_TEST_PCH
  "Precompile the test executables' heavy third-party headers" ON)
# A bundle compiles its test files in batches of this many per translation
# unit (a unity build: the library's templates are instantiated and
# optimised once per batch, not once per file); 0 compiles each file alone.
# Each test file keeps its names in namespace throttlekit::<file stem>, so
# files of one batch do not collide.
set(THROTTLEKIT_TEST_UNITY_BATCH 4 CACHE STRING
  "Test files per unity translation unit in a bundle (0: no unity build)")

# throttlekit_test(NAME <name> SOURCES <files...> LABELS <labels...>
#                  [LIBS <extra link libraries...>] [STANDALONE])
# Registers one ctest test named <name> whose labels say its kind (unit,
# property, model, ...) and needs (tsan, redis...). Its sources join the
# bundle of their directory: one executable per tests/<area>
# (`<area>_tests`, main in tests/support/bundle_main.cc), which the test
# runs with --tk_source=<each source>, so it runs exactly the tests those
# files define (docs/testing.md). STANDALONE builds an executable of its own
# named <name> instead (for a test that sets compile definitions on its
# target, or has a main of its own).
function(throttlekit_test)
  cmake_parse_arguments(ARG "STANDALONE" "NAME" "SOURCES;LABELS;LIBS" ${ARGN})
  # A test outside THROTTLEKIT_TEST_SELECT is still defined, in executables
  # left out of `all` that no pass builds.
  set(_selected TRUE)
  set(_exclude "")
  if(NOT THROTTLEKIT_TEST_SELECT STREQUAL "")
    set(_selected FALSE)
    foreach(label IN LISTS ARG_LABELS)
      if(label MATCHES "^(${THROTTLEKIT_TEST_SELECT})$")
        set(_selected TRUE)
      endif()
    endforeach()
    if(NOT _selected)
      set(_exclude EXCLUDE_FROM_ALL)
    endif()
  endif()
  cmake_path(GET CMAKE_CURRENT_SOURCE_DIR FILENAME area)
  if(ARG_STANDALONE)
    set(target ${ARG_NAME})
    add_executable(${target} ${_exclude} ${ARG_SOURCES})
    _throttlekit_test_target(${target} "${area}" STANDALONE)
    target_link_libraries(${target} PRIVATE GTest::gtest_main ${ARG_LIBS})
    add_test(NAME ${ARG_NAME} COMMAND ${target})
  else()
    if(_selected)
      set(target ${area}_tests)
    else()
      set(target ${area}_unselected_tests)
    endif()
    if(NOT TARGET ${target})
      add_executable(${target} ${_exclude}
        "${PROJECT_SOURCE_DIR}/tests/support/bundle_main.cc")
      _throttlekit_test_target(${target} "${area}")
      if(THROTTLEKIT_TEST_UNITY_BATCH GREATER 0)
        set_target_properties(${target} PROPERTIES UNITY_BUILD ON
          UNITY_BUILD_BATCH_SIZE ${THROTTLEKIT_TEST_UNITY_BATCH})
        set_source_files_properties(
          "${PROJECT_SOURCE_DIR}/tests/support/bundle_main.cc"
          "${PROJECT_SOURCE_DIR}/tests/support/allocation_counter.cc"
          TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endif()
    target_sources(${target} PRIVATE ${ARG_SOURCES})
    target_link_libraries(${target} PRIVATE ${ARG_LIBS})
    set(_args "")
    foreach(source IN LISTS ARG_SOURCES)
      cmake_path(ABSOLUTE_PATH source NORMALIZE OUTPUT_VARIABLE _abs)
      cmake_path(RELATIVE_PATH _abs BASE_DIRECTORY "${PROJECT_SOURCE_DIR}"
                 OUTPUT_VARIABLE _rel)
      list(APPEND _args "--tk_source=${_rel}")
    endforeach()
    add_test(NAME ${ARG_NAME} COMMAND ${target} ${_args})
  endif()
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT 600)
  if("property" IN_LIST ARG_LABELS OR "conformance" IN_LIST ARG_LABELS)
    # RapidCheck's default is 100 cases; CI runs 1000 per property.
    throttlekit_property_cases(${ARG_NAME} 1000)
  endif()
  # The share of fixed work a test's loops do (support/test_work.h): the
  # sanitizer presets' fifth, as for property cases. A later
  # set_tests_properties(ENVIRONMENT) drops it, and that test runs in full.
  set_property(TEST ${ARG_NAME} APPEND PROPERTY ENVIRONMENT
    "THROTTLEKIT_TEST_WORK_PERCENT=${THROTTLEKIT_PROPERTY_CASES_PERCENT}")
  # Tests against a real server (label `redis` or `postgres`) require the
  # server fixture started by tests/servers and learn where it listens.
  if("redis" IN_LIST ARG_LABELS)
    set_property(TEST ${ARG_NAME} APPEND PROPERTY FIXTURES_REQUIRED redis_server)
    set_property(TEST ${ARG_NAME} APPEND PROPERTY ENVIRONMENT
      "THROTTLEKIT_REDIS_PORT=${THROTTLEKIT_TEST_REDIS_PORT}"
      "THROTTLEKIT_REDIS_SERVER_SCRIPT=${PROJECT_SOURCE_DIR}/tests/servers/redis_server.sh"
      "THROTTLEKIT_TEST_SERVERS_DIR=${CMAKE_BINARY_DIR}/test-servers")
  endif()
  # Label `cluster`: the Redis Cluster fixture (3 primaries, 3 replicas);
  # label `sentinel`: the Sentinel fixture (a primary, its replica, three
  # sentinels). Their tests kill, restart and fail over the servers: one
  # such test per fixture at a time.
  foreach(_topology IN ITEMS cluster sentinel)
    if(NOT "${_topology}" IN_LIST ARG_LABELS)
      continue()
    endif()
    string(TOUPPER "${_topology}" _upper)
    set_property(TEST ${ARG_NAME} APPEND PROPERTY FIXTURES_REQUIRED redis_${_topology})
    set_property(TEST ${ARG_NAME} APPEND PROPERTY ENVIRONMENT
      "THROTTLEKIT_REDIS_${_upper}_PORT=${THROTTLEKIT_TEST_REDIS_${_upper}_PORT}"
      "THROTTLEKIT_REDIS_${_upper}_SCRIPT=${PROJECT_SOURCE_DIR}/tests/servers/redis_${_topology}.sh"
      "THROTTLEKIT_TEST_SERVERS_DIR=${CMAKE_BINARY_DIR}/test-servers")
    set_property(TEST ${ARG_NAME} APPEND PROPERTY RESOURCE_LOCK redis_${_topology})
  endforeach()
  if(NOT _selected)
    return()
  endif()
  if("tsan" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY THROTTLEKIT_TSAN_TESTS ${target})
  endif()
  if("unit" IN_LIST ARG_LABELS OR "property" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY THROTTLEKIT_ASAN_TESTS ${target})
  endif()
endfunction()

# The share of each property's cases a build runs, in percent. The optimised
# pass runs them all; the sanitizer presets run a fifth (docs/testing.md):
# they look for memory errors, races and undefined behaviour along the same
# paths, while the optimised pass searches the inputs.
set(THROTTLEKIT_PROPERTY_CASES_PERCENT 100 CACHE STRING
  "Percent of each property test's cases this build runs (sanitizers: 20)")

# throttlekit_property_cases(<test> <cases>): <test> runs <cases> RapidCheck
# cases per property (scaled by THROTTLEKIT_PROPERTY_CASES_PERCENT, at least
# RapidCheck's default 100). Call it after any set_tests_properties that
# replaces the test's ENVIRONMENT.
function(throttlekit_property_cases test cases)
  math(EXPR _n "${cases} * ${THROTTLEKIT_PROPERTY_CASES_PERCENT} / 100")
  if(_n LESS 100)
    set(_n 100)
  endif()
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
    "RC_PARAMS=max_success=${_n}")
endfunction()

# throttlekit_serial_test(<tests...>): each test runs with no other test
# beside it (RUN_SERIAL) and carries the label `serial`, so scripts/test.sh
# runs these in a pass of their own with the machine otherwise idle
# (docs/testing.md). For tests whose bounds are timed on a 2-core machine,
# and for tests that change a shared server's state under the others.
function(throttlekit_serial_test)
  foreach(test IN LISTS ARGN)
    set_tests_properties(${test} PROPERTIES RUN_SERIAL TRUE)
    set_property(TEST ${test} APPEND PROPERTY LABELS serial)
  endforeach()
endfunction()

# What every test executable shares: the library, GoogleTest, RapidCheck,
# the counting operator new (support/allocation_counter.h), the warnings,
# tests/ on the include path (#include "support/..."), and the precompiled
# heavy headers. Every test executable of one flavour (the waiting areas'
# or the others', below) shares one precompiled header, built once per
# configuration by an object library; a STANDALONE test's definitions (the
# path of a binary it starts) are ones the header never reads, which clang
# accepts beside a header precompiled without them.
function(_throttlekit_test_target target area)
  cmake_parse_arguments(ARG "STANDALONE" "" "" ${ARGN})
  target_sources(${target} PRIVATE
    "${PROJECT_SOURCE_DIR}/tests/support/allocation_counter.cc")
  set(_pch_target throttlekit_test_pch)
  set(_flags ${THROTTLEKIT_TEST_FLAGS})
  if(area IN_LIST THROTTLEKIT_TEST_WAITING_AREAS
     AND NOT "${THROTTLEKIT_TEST_WAITING_FLAGS}" STREQUAL "")
    set(_pch_target throttlekit_test_pch_waiting)
    list(APPEND _flags ${THROTTLEKIT_TEST_WAITING_FLAGS})
  endif()
  _throttlekit_test_flags(${target} "${_flags}")
  if(NOT THROTTLEKIT_TEST_PCH)
    return()
  endif()
  set(_pch
    "$<$<COMPILE_LANGUAGE:CXX>:${PROJECT_SOURCE_DIR}/tests/support/test_pch.h>")
  if(NOT TARGET ${_pch_target})
    add_library(${_pch_target} OBJECT EXCLUDE_FROM_ALL
      "${PROJECT_SOURCE_DIR}/tests/support/test_pch.cc")
    _throttlekit_test_flags(${_pch_target} "${_flags}")
    target_precompile_headers(${_pch_target} PRIVATE "${_pch}")
  endif()
  target_precompile_headers(${target} REUSE_FROM ${_pch_target})
endfunction()

# The compile and link settings every test translation unit is built with
# (the shared precompiled header requires the same on both sides; -pthread
# because gRPC's targets add it to the server's bundle, and a header
# precompiled without it is refused there). <flags>: the flavour's extra
# options (THROTTLEKIT_TEST_FLAGS, then THROTTLEKIT_TEST_WAITING_FLAGS in
# the waiting areas).
function(_throttlekit_test_flags target flags)
  target_link_libraries(${target} PRIVATE
    throttlekit::throttlekit GTest::gtest rapidcheck)
  target_compile_options(${target} PRIVATE ${THROTTLEKIT_WARNINGS} -pthread
    ${flags})
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}/tests")
endfunction()

# Checking the benchmarks without building them. With this option (the test
# command's build) each benchmark and bench/ tool is an object library whose
# sources clang only parses and checks (-fsyntax-only; every warning still an
# error), with no code generated and nothing linked: they are never run
# there, and a benchmark that stops compiling is still caught. The launcher
# (cmake/syntax_only.sh) leaves the empty object file the build expects, so
# an unchanged benchmark is not checked again.
option(THROTTLEKIT_BENCHMARK_SYNTAX_ONLY
  "Only check that the benchmarks compile (no code, no link)" OFF)

# throttlekit_bench_executable(NAME <name> SOURCES <files...> [LIBS ...]):
# a benchmark or bench/ tool linked with <libs> (with
# THROTTLEKIT_BENCHMARK_SYNTAX_ONLY, checked only).
function(throttlekit_bench_executable)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;LIBS" ${ARGN})
  if(THROTTLEKIT_BENCHMARK_SYNTAX_ONLY)
    add_library(${ARG_NAME} OBJECT ${ARG_SOURCES})
    target_compile_options(${ARG_NAME} PRIVATE -fsyntax-only)
    set_target_properties(${ARG_NAME} PROPERTIES CXX_COMPILER_LAUNCHER
      "${PROJECT_SOURCE_DIR}/cmake/syntax_only.sh")
  else()
    add_executable(${ARG_NAME} ${ARG_SOURCES})
  endif()
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_LIBS})
  target_compile_options(${ARG_NAME} PRIVATE ${THROTTLEKIT_WARNINGS}
    ${THROTTLEKIT_BENCHMARK_FLAGS})
endfunction()

# throttlekit_benchmark(NAME <name> SOURCES <files...> [LIBS ...]): a Google
# Benchmark executable.
function(throttlekit_benchmark)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;LIBS" ${ARGN})
  throttlekit_bench_executable(NAME ${ARG_NAME} SOURCES ${ARG_SOURCES}
    LIBS throttlekit::throttlekit benchmark::benchmark ${ARG_LIBS})
endfunction()

# Extra compile options of every test translation unit (a list), after the
# build type's.
set(THROTTLEKIT_TEST_FLAGS "" CACHE STRING
  "Extra compile options for the tests")
# The test areas (tests/<area>, and the examples' tests) whose tests wait
# on real servers, processes and clocks rather than on their own code:
# Redis, Postgres, the server, unified admission, distributed concurrency.
# Their translation units take THROTTLEKIT_TEST_WAITING_FLAGS after
# THROTTLEKIT_TEST_FLAGS; the test command's build sets -O0 there, which
# halves their compile time and costs their run a few seconds, where the
# other areas (property searches, model checkers, the simulator, tight
# loops) keep the build type's -O1 (docs/testing.md).
set(THROTTLEKIT_TEST_WAITING_AREAS
  "redis;postgres;server;admission;concurrency;examples" CACHE STRING
  "Test areas compiled with THROTTLEKIT_TEST_WAITING_FLAGS")
set(THROTTLEKIT_TEST_WAITING_FLAGS "" CACHE STRING
  "Extra compile options for the waiting test areas (the check preset: -O0)")

# Extra compile options of the fleet simulator (sim/: its library and
# tk_sim), after the build type's. The test command's build, `-O1`
# elsewhere, sets -O2 here: the simulator's seeds are the suite's most
# CPU-bound tests (docs/testing.md).
set(THROTTLEKIT_SIM_FLAGS "" CACHE STRING
  "Extra compile options for the fleet simulator (the check preset: -O2)")

# Extra compile options of the benchmarks and the bench/ tools (a list).
# The test command's build sets -O0: there they are only compiled, never
# run, so they keep building without costing an optimiser pass.
set(THROTTLEKIT_BENCHMARK_FLAGS "" CACHE STRING
  "Extra compile options for the benchmarks (the check preset: -O0)")

# Extra compile options of the examples (a list). The test command's build
# sets -O0: its tests run each example once, for what it prints and
# answers, never for its speed.
set(THROTTLEKIT_EXAMPLE_FLAGS "" CACHE STRING
  "Extra compile options for the examples (the check preset: -O0)")

set(THROTTLEKIT_WARNINGS
  $<$<OR:$<CXX_COMPILER_ID:GNU>,$<CXX_COMPILER_ID:Clang>>:-Wall -Wextra -Wpedantic
  -Wno-missing-field-initializers>)
