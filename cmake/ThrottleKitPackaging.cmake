# CPack: two Debian packages from one build (docs/packaging.md).
#
#   libthrottlekit-dev   the `library` install component: headers, the static
#                        backends that were built (throttlekit_redis,
#                        throttlekit_postgres), the CMake package files and
#                        the pkg-config files; Depends on the -dev packages
#                        they need, at the versions they were built against.
#   throttlekit-server   the `server` component: the binary, the example
#                        configuration as a conffile, a hardened systemd unit
#                        running it as the system user `throttlekit` (made by
#                        postinst); Depends from dpkg-shlibdeps (dpkg-dev).
#
# `cpack` in the build tree writes them (scripts/package.sh does it all from
# a clean clone). Only these two components are packaged, so a build with
# tests, benchmarks or examples packages the same thing.
include_guard(GLOBAL)
if(NOT PROJECT_IS_TOP_LEVEL)
  # A parent project that installs ThrottleKit owns its CPack configuration.
  return()
endif()

# The packages install under /usr whatever CMAKE_INSTALL_PREFIX this build
# has; the unit's paths are the package's.
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(_tk_pkg_bindir "${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}")
  set(_tk_pkg_bindir "${CMAKE_INSTALL_BINDIR}")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME throttlekit)
set(CPACK_PACKAGE_VENDOR "The ThrottleKit authors")
set(CPACK_PACKAGE_CONTACT "ThrottleKit maintainers <maintainers@throttlekit.invalid>"
    CACHE STRING "Maintainer field of the .deb packages")
# Each package's Description is its component's: the first line is its
# synopsis. CPackDeb would put the project's summary before it unless the
# summary is CPack's default, so it is left at that default.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
# Executables are stripped (install(TARGETS) strips executables and shared
# libraries only; the static backends keep their symbols).
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL library)
if(TARGET throttlekit-server)
  list(APPEND CPACK_COMPONENTS_ALL server)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
# Maintainer scripts 0755, conffiles 0644, whatever the checkout's modes.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# Debian's copyright file, per package (packaging only: EXCLUDE_FROM_ALL
# keeps it out of a plain `cmake --install`; CPack installs it by component).
set(_tk_package_library libthrottlekit-dev)
set(_tk_package_server throttlekit-server)
foreach(_tk_component IN LISTS CPACK_COMPONENTS_ALL)
  install(FILES "${PROJECT_SOURCE_DIR}/LICENSE"
    DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/${_tk_package_${_tk_component}}"
    RENAME copyright COMPONENT ${_tk_component} EXCLUDE_FROM_ALL)
endforeach()

# --- libthrottlekit-dev -----------------------------------------------------
set(CPACK_DEBIAN_LIBRARY_PACKAGE_NAME ${_tk_package_library})
set(CPACK_DEBIAN_LIBRARY_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_LIBRARY_DESCRIPTION
  "admission control for C++ services (development files)
ThrottleKit for C++: the headers of the header-mostly C++20 core
(strategies, the memory store, two-tier leasing, adaptive concurrency,
unified admission, federation), the static Redis and PostgreSQL backends
this build has, and the CMake (find_package(throttlekit)) and pkg-config
(throttlekit.pc) files.")

# "X.Y" of a version, and the "X.(Y+1)" after it: the static backends were
# compiled against one series of their client library (hiredis and libpqxx
# change their ABI between minor releases), so that series is required.
function(_tk_series version out_series out_next)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _ "${version}")
  math(EXPR _next "${CMAKE_MATCH_2} + 1")
  set(${out_series} "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}" PARENT_SCOPE)
  set(${out_next} "${CMAKE_MATCH_1}.${_next}" PARENT_SCOPE)
endfunction()

set(_tk_lib_depends "")
if(TARGET throttlekit_redis OR TARGET throttlekit_postgres)
  # Compiled code names Abseil's inline namespace (its LTS date): that LTS.
  if(absl_VERSION MATCHES "^([0-9]+)")
    math(EXPR _tk_absl_next "${CMAKE_MATCH_1} + 1")
    list(APPEND _tk_lib_depends "libabsl-dev (>= ${CMAKE_MATCH_1})"
                                "libabsl-dev (<< ${_tk_absl_next})")
  else()
    list(APPEND _tk_lib_depends libabsl-dev)
  endif()
  # The package config finds hiredis, libpqxx and libpq through pkg-config.
  list(APPEND _tk_lib_depends "pkgconf | pkg-config")
else()
  list(APPEND _tk_lib_depends libabsl-dev)
endif()
if(TARGET throttlekit_redis)
  _tk_series("${HIREDIS_VERSION}" _tk_series _tk_next)
  list(APPEND _tk_lib_depends "libhiredis-dev (>= ${_tk_series})"
                              "libhiredis-dev (<< ${_tk_next})")
endif()
if(TARGET throttlekit_postgres)
  _tk_series("${THROTTLEKIT_PQXX_VERSION}" _tk_series _tk_next)
  list(APPEND _tk_lib_depends "libpqxx-dev (>= ${_tk_series})"
                              "libpqxx-dev (<< ${_tk_next})" libpq-dev)
endif()
list(JOIN _tk_lib_depends ", " CPACK_DEBIAN_LIBRARY_PACKAGE_DEPENDS)

# --- throttlekit-server -----------------------------------------------------
if(TARGET throttlekit-server)
  set(CPACK_DEBIAN_SERVER_PACKAGE_NAME ${_tk_package_server})
  set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
  set(CPACK_COMPONENT_SERVER_DESCRIPTION
    "admission-control server for ThrottleKit (gRPC)
throttlekit-server answers ThrottleKit's rate-limit, concurrency and
token-budget decisions over gRPC (throttlekit.v1) for services in any
language, on its embedded memory store, Redis or PostgreSQL. A systemd
unit (not enabled on install) runs it as the system user throttlekit with
/etc/throttlekit/server.yaml.")
  # Its shared libraries (gRPC, protobuf, yaml-cpp, Abseil, ...) from
  # dpkg-shlibdeps (Debian's dpkg-dev), merged with adduser for postinst.
  set(CPACK_DEBIAN_SERVER_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS adduser)

  set(THROTTLEKIT_SERVER_USER throttlekit)
  set(THROTTLEKIT_SERVER_BINARY "${_tk_pkg_bindir}/throttlekit-server")
  set(THROTTLEKIT_SERVER_CONFIG /etc/throttlekit/server.yaml)
  set(THROTTLEKIT_SERVER_DEFAULTS /etc/default/throttlekit-server)
  set(_tk_server_docdir "${CMAKE_INSTALL_DATAROOTDIR}/doc/throttlekit-server")
  set(THROTTLEKIT_SERVER_DOC
    "${CPACK_PACKAGING_INSTALL_PREFIX}/${_tk_server_docdir}/server.md")
  set(_tk_pkg_out "${PROJECT_BINARY_DIR}/packaging")
  configure_file("${PROJECT_SOURCE_DIR}/packaging/throttlekit-server.service.in"
                 "${_tk_pkg_out}/throttlekit-server.service" @ONLY)
  # /usr/lib/systemd/system (systemd reads it; /lib is /usr/lib on Debian).
  install(FILES "${_tk_pkg_out}/throttlekit-server.service"
    DESTINATION lib/systemd/system COMPONENT server EXCLUDE_FROM_ALL)
  install(FILES "${PROJECT_SOURCE_DIR}/examples/server.yaml"
    DESTINATION /etc/throttlekit COMPONENT server EXCLUDE_FROM_ALL)
  install(FILES "${PROJECT_SOURCE_DIR}/packaging/throttlekit-server.default"
    DESTINATION /etc/default RENAME throttlekit-server
    PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT server EXCLUDE_FROM_ALL)
  install(FILES "${PROJECT_SOURCE_DIR}/docs/server.md"
    DESTINATION "${_tk_server_docdir}" COMPONENT server EXCLUDE_FROM_ALL)
  # What dpkg keeps on upgrade when the administrator changed it.
  file(WRITE "${_tk_pkg_out}/conffiles"
    "${THROTTLEKIT_SERVER_CONFIG}\n${THROTTLEKIT_SERVER_DEFAULTS}\n")
  set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    "${_tk_pkg_out}/conffiles"
    "${PROJECT_SOURCE_DIR}/packaging/debian/postinst"
    "${PROJECT_SOURCE_DIR}/packaging/debian/prerm"
    "${PROJECT_SOURCE_DIR}/packaging/debian/postrm")
endif()

include(CPack)
