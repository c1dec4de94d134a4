# Declarative helpers so each directory's CMakeLists is a list of targets.
include_guard(GLOBAL)
include(GNUInstallDirs)

# throttlekit_test(NAME <name> SOURCES <files...> LABELS <labels...>
#                  [LIBS <extra link libraries...>])
# Builds one GoogleTest executable and registers it as one ctest test whose
# labels say its kind (unit, property, model, ...) and needs (tsan, redis...).
function(throttlekit_test)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;LABELS;LIBS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE
    throttlekit::throttlekit GTest::gtest GTest::gtest_main ${ARG_LIBS})
  if("property" IN_LIST ARG_LABELS OR "conformance" IN_LIST ARG_LABELS)
    target_link_libraries(${ARG_NAME} PRIVATE rapidcheck)
  endif()
  target_compile_options(${ARG_NAME} PRIVATE ${THROTTLEKIT_WARNINGS})
  # Shared test helpers: #include "support/...".
  target_include_directories(${ARG_NAME} PRIVATE "${PROJECT_SOURCE_DIR}/tests")
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME})
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT 600)
  if("property" IN_LIST ARG_LABELS OR "conformance" IN_LIST ARG_LABELS)
    # RapidCheck's default is 100 cases; CI runs 1000 per property.
    set_property(TEST ${ARG_NAME} APPEND PROPERTY
      ENVIRONMENT "RC_PARAMS=max_success=1000")
  endif()
  # Tests against a real server (label `redis` or `postgres`) require the
  # server fixture started by tests/servers and learn where it listens.
  if("redis" IN_LIST ARG_LABELS)
    set_property(TEST ${ARG_NAME} APPEND PROPERTY FIXTURES_REQUIRED redis_server)
    set_property(TEST ${ARG_NAME} APPEND PROPERTY ENVIRONMENT
      "THROTTLEKIT_REDIS_PORT=${THROTTLEKIT_TEST_REDIS_PORT}"
      "THROTTLEKIT_REDIS_SERVER_SCRIPT=${PROJECT_SOURCE_DIR}/tests/servers/redis_server.sh"
      "THROTTLEKIT_TEST_SERVERS_DIR=${CMAKE_BINARY_DIR}/test-servers")
  endif()
  if("tsan" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY THROTTLEKIT_TSAN_TESTS ${ARG_NAME})
  endif()
  if("unit" IN_LIST ARG_LABELS OR "property" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY THROTTLEKIT_ASAN_TESTS ${ARG_NAME})
  endif()
endfunction()

# throttlekit_benchmark(NAME <name> SOURCES <files...> [LIBS ...])
function(throttlekit_benchmark)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;LIBS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE
    throttlekit::throttlekit benchmark::benchmark ${ARG_LIBS})
  target_compile_options(${ARG_NAME} PRIVATE ${THROTTLEKIT_WARNINGS})
endfunction()

set(THROTTLEKIT_WARNINGS
  $<$<OR:$<CXX_COMPILER_ID:GNU>,$<CXX_COMPILER_ID:Clang>>:-Wall -Wextra -Wpedantic
  -Wno-missing-field-initializers>)
