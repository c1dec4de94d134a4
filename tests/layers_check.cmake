# Fails when a public header includes one from a higher layer
# (docs/architecture.md, "Layers": each depends only on the ones above it).
# INCLUDE_DIR: the directory holding throttlekit/ (the project's include/,
# or the self-test's fixture). A header's layer is its directory's; a
# directory with no layer here is an error, so a new one is placed on
# purpose (here and in docs/architecture.md).
set(layer_core 1)
set(layer_strategy 2)
set(layer_store 3)
set(layer_coordinator 4)
set(layer_redis 4)
set(layer_postgres 4)
set(layer_twotier 5)
set(layer_concurrency 5)
set(layer_federation 5)
set(layer_observe 6)
set(layer_admission 7)
set(layer_asio 8)

get_filename_component(INCLUDE_DIR "${INCLUDE_DIR}" ABSOLUTE)
file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}/throttlekit"
  "${INCLUDE_DIR}/throttlekit/*.h")
# throttlekit.h, the umbrella over every layer, is above them all.
list(FILTER headers INCLUDE REGEX "/")
set(problems "")
set(checked 0)
foreach(header IN LISTS headers)
  string(REGEX REPLACE "/.*" "" dir "${header}")
  if(NOT DEFINED layer_${dir})
    string(APPEND problems
      "\n  throttlekit/${header}: its directory ${dir}/ has no layer")
    continue()
  endif()
  file(STRINGS "${INCLUDE_DIR}/throttlekit/${header}" includes
    REGEX "^#include \"throttlekit/[a-z_0-9]+/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"throttlekit/([a-z_0-9]+)/.*" "\\1"
      target "${line}")
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" path "${line}")
    math(EXPR checked "${checked} + 1")
    if(NOT DEFINED layer_${target})
      string(APPEND problems
        "\n  throttlekit/${header} includes ${path}: ${target}/ has no layer")
    elseif(layer_${target} GREATER layer_${dir})
      string(APPEND problems
        "\n  throttlekit/${header} (layer ${layer_${dir}}, ${dir}) includes "
        "${path} (layer ${layer_${target}}, ${target})")
    endif()
  endforeach()
endforeach()
list(LENGTH headers count)
if(problems)
  message(FATAL_ERROR "layers: a header includes one from a higher layer, "
                      "or a directory has no layer (tests/layers_check.cmake, "
                      "docs/architecture.md):${problems}")
endif()
message(STATUS "layers: ${count} headers, ${checked} includes of "
               "throttlekit/, every one from the same or a lower layer")
