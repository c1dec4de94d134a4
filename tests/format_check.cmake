# Fails when any C++ source or header is not clang-format clean.
file(GLOB_RECURSE files
  "${SOURCE_DIR}/include/*.h" "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/src/*.cc"
  "${SOURCE_DIR}/tests/*.h" "${SOURCE_DIR}/tests/*.cc"
  "${SOURCE_DIR}/bench/*.h" "${SOURCE_DIR}/bench/*.cc"
  "${SOURCE_DIR}/examples/*.h" "${SOURCE_DIR}/examples/*.cc")
execute_process(COMMAND "${CLANG_FORMAT}" --dry-run --Werror ${files}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "clang-format: files above need formatting "
                      "(run: clang-format -i <file>)")
endif()
