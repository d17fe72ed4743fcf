# Installation and packaging of tdist (included at the end of the top-level CMakeLists.txt,
# after every target exists).
#
#   cmake --install build --prefix /opt/tdist
#
# installs
#   lib/libtdist.so.0.1.0 (+ .so.0, .so)           component Runtime (namelink: Development)
#   bin/tdistrun, bin/tdist-bench, bin/tdist-trace (when built)
#                                                  component Runtime
#   include/tdist/*.h                              component Development
#   lib/cmake/tdist/tdist{Config,ConfigVersion,Targets}.cmake
#                                                  component Development
#   lib/pkgconfig/tdist.pc                         component Development
#
# A consumer then writes  find_package(tdist REQUIRED)  and
# target_link_libraries(app PRIVATE tdist::tdist)  (CMAKE_PREFIX_PATH=/opt/tdist), or
# g++ -std=c++20 app.cpp $(pkg-config --cflags --libs tdist)  (PKG_CONFIG_PATH=/opt/tdist/lib/pkgconfig).
# The build tree is usable the same way: CMAKE_PREFIX_PATH=<build dir>.
include(CMakePackageConfigHelpers)

# Where the CMake package and the pkg-config file go (tests/install/ assumes the same).
set(TDIST_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/tdist")
set(TDIST_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

# ---------------------------------------------------------------------------------------------
# What a consumer of the library inherits. The public headers use C++20 (designated
# initializers, defaulted operator==, std::span), so the requirement travels with the target.
# A sanitized libtdist references the ASan/UBSan runtimes, which must come first in the
# program's library list: a program linking the sanitized library links with the same flags.
set_property(TARGET tdist APPEND PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_20)
set(TDIST_PC_EXTRA_LIBS "")
if(TDIST_SANITIZE)
  set_property(TARGET tdist APPEND PROPERTY INTERFACE_LINK_OPTIONS -fsanitize=address,undefined)
  set(TDIST_PC_EXTRA_LIBS " -fsanitize=address,undefined")
endif()

# The programs find libtdist next to them after installation: <prefix>/bin -> <prefix>/lib
# (tdist-trace does not use it: it only reads files).
set(TDIST_INSTALLED_PROGRAMS "")
foreach(tool IN ITEMS tdistrun tdist-bench tdist-trace)
  if(TARGET ${tool})
    list(APPEND TDIST_INSTALLED_PROGRAMS ${tool})
  endif()
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}")
  set(TDIST_PROGRAM_RPATH "${CMAKE_INSTALL_FULL_LIBDIR}")
else()
  file(RELATIVE_PATH _tdist_bin_to_lib "/prefix/${CMAKE_INSTALL_BINDIR}" "/prefix/${CMAKE_INSTALL_LIBDIR}")
  set(TDIST_PROGRAM_RPATH "$ORIGIN/${_tdist_bin_to_lib}")
endif()
foreach(tool IN LISTS TDIST_INSTALLED_PROGRAMS)
  set_property(TARGET ${tool} APPEND PROPERTY INSTALL_RPATH "${TDIST_PROGRAM_RPATH}")
endforeach()

# ---------------------------------------------------------------------------------------------
# Library, programs, headers.
install(TARGETS tdist ${TDIST_INSTALLED_PROGRAMS}
  EXPORT tdistTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tdist
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT Development
  FILES_MATCHING PATTERN "*.h")

# ---------------------------------------------------------------------------------------------
# CMake package: find_package(tdist) -> tdist::tdist (and tdist::tdistrun, tdist::tdist-bench,
# tdist::tdist-trace).
# Version 0.x promises nothing across minor versions; from 1.0 on, within a major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_tdist_compat SameMinorVersion)
else()
  set(_tdist_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tdistConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${_tdist_compat})

# The installed config ...
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tdistConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake-install/tdistConfig.cmake
  INSTALL_DESTINATION ${TDIST_INSTALL_CMAKEDIR})
# ... and one for the build tree (CMAKE_PREFIX_PATH=<build dir> or tdist_DIR=<build dir>).
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tdistConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tdistConfig.cmake
  INSTALL_DESTINATION ${PROJECT_BINARY_DIR}
  INSTALL_PREFIX ${PROJECT_BINARY_DIR})
export(EXPORT tdistTargets NAMESPACE tdist:: FILE ${PROJECT_BINARY_DIR}/tdistTargets.cmake)

install(EXPORT tdistTargets
  NAMESPACE tdist::
  FILE tdistTargets.cmake
  DESTINATION ${TDIST_INSTALL_CMAKEDIR}
  COMPONENT Development)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake-install/tdistConfig.cmake
  ${PROJECT_BINARY_DIR}/tdistConfigVersion.cmake
  DESTINATION ${TDIST_INSTALL_CMAKEDIR}
  COMPONENT Development)

# ---------------------------------------------------------------------------------------------
# pkg-config. `cmake --install --prefix P` picks the prefix at install time, so tdist.pc is
# written then, with P in it (no DESTDIR): configure time fills in everything else and leaves
# @TDIST_PC_PREFIX@ for the install step.
foreach(dir IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(TDIST_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(TDIST_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(TDIST_PC_PREFIX "@TDIST_PC_PREFIX@")
set(TDIST_PC_RPATH "@TDIST_PC_RPATH@")
configure_file(${PROJECT_SOURCE_DIR}/cmake/tdist.pc.in ${PROJECT_BINARY_DIR}/tdist.pc.stage @ONLY)

# A relocatable archive made by CPack (cpack -G TGZ, staged under _CPack_Packages without
# DESTDIR) gets a prefix relative to the .pc file's own place instead: ${pcfiledir}/../..
set(_tdist_pc_relocate "")
if(IS_ABSOLUTE "${TDIST_INSTALL_PKGCONFIGDIR}")
  set(_tdist_pc_dest "${TDIST_INSTALL_PKGCONFIGDIR}")
else()
  set(_tdist_pc_dest "\${CMAKE_INSTALL_PREFIX}/${TDIST_INSTALL_PKGCONFIGDIR}")
  if(NOT IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" AND NOT IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    file(RELATIVE_PATH _tdist_pc_up "/prefix/${TDIST_INSTALL_PKGCONFIGDIR}" "/prefix")
    string(REGEX REPLACE "/+$" "" _tdist_pc_up "${_tdist_pc_up}")
    set(_tdist_pc_relocate "
  if(\"\$ENV{DESTDIR}\" STREQUAL \"\" AND TDIST_PC_PREFIX MATCHES \"/_CPack_Packages/\")
    set(TDIST_PC_PREFIX \"\\\${pcfiledir}/${_tdist_pc_up}\")
  endif()")
  endif()
endif()
# A program linked with `pkg-config --libs tdist` must find libtdist.so.0 when it runs, and the
# dynamic loader looks only in the system's folders (and LD_LIBRARY_PATH, and what ldconfig
# cached): outside them (/opt/tdist/lib, and /usr/local/lib until ldconfig runs) the Libs line
# carries -Wl,-rpath,${libdir}, as libraries installed to their own prefix commonly do.
set(TDIST_SYSTEM_LIBDIRS ${CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES} ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES})
list(FILTER TDIST_SYSTEM_LIBDIRS EXCLUDE REGEX "/gcc/")  # the compiler's own, not the loader's
list(REMOVE_DUPLICATES TDIST_SYSTEM_LIBDIRS)
install(CODE "
  get_filename_component(TDIST_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\" ABSOLUTE)${_tdist_pc_relocate}
  set(_tdist_system_libdirs \"${TDIST_SYSTEM_LIBDIRS}\")
  set(_tdist_pc_libdir \"${CMAKE_INSTALL_LIBDIR}\")
  if(NOT IS_ABSOLUTE \"\${_tdist_pc_libdir}\")
    set(_tdist_pc_libdir \"\${TDIST_PC_PREFIX}/\${_tdist_pc_libdir}\")
  endif()
  set(TDIST_PC_RPATH \" -Wl,-rpath,\\\${libdir}\")
  list(FIND _tdist_system_libdirs \"\${_tdist_pc_libdir}\" _tdist_pc_system)  # no IN_LIST: no policies here
  if(_tdist_pc_system GREATER -1)
    set(TDIST_PC_RPATH \"\")
  endif()
  string(RANDOM LENGTH 12 _tdist_pc_tag)
  set(_tdist_pc_tmp \"${PROJECT_BINARY_DIR}/CMakeFiles/tdist.pc.\${_tdist_pc_tag}/tdist.pc\")
  configure_file(\"${PROJECT_BINARY_DIR}/tdist.pc.stage\" \"\${_tdist_pc_tmp}\" @ONLY)
  file(INSTALL DESTINATION \"${_tdist_pc_dest}\" TYPE FILE FILES \"\${_tdist_pc_tmp}\")
  get_filename_component(_tdist_pc_tmpdir \"\${_tdist_pc_tmp}\" DIRECTORY)
  file(REMOVE_RECURSE \"\${_tdist_pc_tmpdir}\")
" COMPONENT Development)

# ---------------------------------------------------------------------------------------------
# Binary packages from a build tree: cpack -G TGZ (or DEB) --config build/CPackConfig.cmake
if(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  set(CPACK_PACKAGE_NAME tdist)
  set(CPACK_PACKAGE_VENDOR "tdist")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
  set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
  set(CPACK_PACKAGE_CONTACT "tdist maintainers")
  set(CPACK_GENERATOR TGZ)
  set(CPACK_SOURCE_GENERATOR TGZ)
  set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/" "/\\\\.cache/")
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_SECTION libs)
  include(CPack)
endif()
