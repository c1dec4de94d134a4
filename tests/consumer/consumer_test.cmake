# Runs one consumer build. Variables: MODE (find_package|add_subdirectory),
# SOURCE_DIR (ThrottleKit's source), BUILD_TREE (its build tree, installed
# for find_package), BINARY_DIR (scratch), GENERATOR,
# REDIS, POSTGRES (ON: also build and run a consumer of that component).
file(REMOVE_RECURSE "${BINARY_DIR}")
file(MAKE_DIRECTORY "${BINARY_DIR}")
set(prefix_args "")
if(MODE STREQUAL "find_package")
  # Install the build tree under test (its install rules, as the packages
  # use them) into a private prefix first. A second configure and build of
  # the library would compile it again beside the sanitizer builds; the
  # add_subdirectory mode compiles it with the consumer's own compiler.
  execute_process(
    COMMAND "${CMAKE_COMMAND}" --install "${BUILD_TREE}"
            --prefix "${BINARY_DIR}/prefix"
    RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "installing ThrottleKit failed: ${rc}")
  endif()
  set(prefix_args "-DCMAKE_PREFIX_PATH=${BINARY_DIR}/prefix")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/consumer/project"
          -B "${BINARY_DIR}/consumer" -G "${GENERATOR}"
          "-DTHROTTLEKIT_CONSUMER_MODE=${MODE}"
          "-DTHROTTLEKIT_SOURCE_DIR=${SOURCE_DIR}" ${prefix_args}
          "-DTHROTTLEKIT_CONSUMER_REDIS=${REDIS}"
          "-DTHROTTLEKIT_CONSUMER_POSTGRES=${POSTGRES}"
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer (${MODE}) failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BINARY_DIR}/consumer"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer (${MODE}) failed: ${rc}")
endif()
execute_process(COMMAND "${BINARY_DIR}/consumer/consumer" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer (${MODE}) got wrong decisions: ${rc}")
endif()
foreach(component redis postgres)
  string(TOUPPER "${component}" flag)
  if(${flag})
    execute_process(COMMAND "${BINARY_DIR}/consumer/consumer_${component}"
                    RESULT_VARIABLE rc)
    if(rc)
      message(FATAL_ERROR "the ${component} consumer (${MODE}) failed: ${rc}")
    endif()
  endif()
endforeach()
