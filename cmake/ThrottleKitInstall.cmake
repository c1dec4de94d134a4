# Install rules, the package config and its version file, and the pkg-config
# files. Everything here is the `library` install component (the backends'
# rules in src/ reach it through CMAKE_INSTALL_DEFAULT_COMPONENT_NAME, set in
# the top-level CMakeLists.txt); throttlekit-server is the `server` component
# (docs/packaging.md).
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

install(TARGETS throttlekit EXPORT throttlekitTargets COMPONENT library)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT library)
set(THROTTLEKIT_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/throttlekit")
install(EXPORT throttlekitTargets NAMESPACE throttlekit::
        DESTINATION "${THROTTLEKIT_CMAKE_DIR}" COMPONENT library)
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/throttlekitConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/throttlekitConfig.cmake"
  INSTALL_DESTINATION "${THROTTLEKIT_CMAKE_DIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/throttlekitConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/throttlekitConfig.cmake"
              "${PROJECT_BINARY_DIR}/throttlekitConfigVersion.cmake"
        DESTINATION "${THROTTLEKIT_CMAKE_DIR}" COMPONENT library)
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE"
        DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/throttlekit"
        COMPONENT library)

# pkg-config files for consumers without CMake: throttlekit.pc (the core)
# and throttlekit-redis.pc / throttlekit-postgres.pc for the backends that
# were built. Their prefix is found from where the .pc file lies
# (${pcfiledir}), so one file serves /usr, /usr/local or an unpacked .deb;
# absolute install directories are written as given.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR
   IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(THROTTLEKIT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(THROTTLEKIT_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(THROTTLEKIT_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH _tk_pc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _tk_pc_up "${_tk_pc_up}")
  set(THROTTLEKIT_PC_PREFIX "\${pcfiledir}/${_tk_pc_up}")
  set(THROTTLEKIT_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(THROTTLEKIT_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(_tk_pc_out "${PROJECT_BINARY_DIR}/pkgconfig")
configure_file("${PROJECT_SOURCE_DIR}/cmake/throttlekit.pc.in"
               "${_tk_pc_out}/throttlekit.pc" @ONLY)
set(_tk_pc_files "${_tk_pc_out}/throttlekit.pc")
# The backends are static libraries: what they link privately is in Requires
# (a consumer links it too), after the core.
set(_tk_pc_redis_requires "throttlekit absl_time hiredis")
set(_tk_pc_postgres_requires "throttlekit absl_time libpqxx libpq")
foreach(_tk_component IN ITEMS redis postgres)
  if(TARGET throttlekit_${_tk_component})
    set(THROTTLEKIT_PC_COMPONENT "${_tk_component}")
    set(THROTTLEKIT_PC_REQUIRES "${_tk_pc_${_tk_component}_requires}")
    configure_file("${PROJECT_SOURCE_DIR}/cmake/throttlekit-component.pc.in"
                   "${_tk_pc_out}/throttlekit-${_tk_component}.pc" @ONLY)
    list(APPEND _tk_pc_files "${_tk_pc_out}/throttlekit-${_tk_component}.pc")
  endif()
endforeach()
install(FILES ${_tk_pc_files}
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig" COMPONENT library)
