# throttlekit_embed(OUTPUT <header> NAMESPACE <ns> FILES <files...>)
# Generates, at build time, a header that holds each file's text as an
# `inline constexpr std::string_view` named after the file (`gcra.lua` ->
# `kGcraLua`), so scripts and SQL live as plain files under src/ and are
# compiled into the library. Re-generated whenever a file changes.
include_guard(GLOBAL)

set(_TK_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/embed_files.cmake")

function(throttlekit_embed)
  cmake_parse_arguments(ARG "" "OUTPUT;NAMESPACE" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT "${ARG_OUTPUT}"
    COMMAND "${CMAKE_COMMAND}" "-DOUTPUT=${ARG_OUTPUT}"
            "-DNAMESPACE=${ARG_NAMESPACE}" "-DFILES=${ARG_FILES}"
            -P "${_TK_EMBED_SCRIPT}"
    DEPENDS ${ARG_FILES} "${_TK_EMBED_SCRIPT}"
    COMMENT "Embedding ${ARG_NAMESPACE} sources"
    VERBATIM)
endfunction()
