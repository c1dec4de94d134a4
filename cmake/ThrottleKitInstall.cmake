# Install rules, the package config and its version file.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

install(TARGETS throttlekit EXPORT throttlekitTargets)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
set(THROTTLEKIT_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/throttlekit")
install(EXPORT throttlekitTargets NAMESPACE throttlekit::
        DESTINATION "${THROTTLEKIT_CMAKE_DIR}")
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/throttlekitConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/throttlekitConfig.cmake"
  INSTALL_DESTINATION "${THROTTLEKIT_CMAKE_DIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/throttlekitConfigVersion.cmake"
  COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/throttlekitConfig.cmake"
              "${PROJECT_BINARY_DIR}/throttlekitConfigVersion.cmake"
        DESTINATION "${THROTTLEKIT_CMAKE_DIR}")
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE"
        DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/throttlekit")
