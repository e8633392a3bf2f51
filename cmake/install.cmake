# `cmake --install BUILD --prefix P`: the public headers, the static libraries and a CMake package,
# so that a user's project can `find_package(qtransit CONFIG REQUIRED)` and link qtransit::gate (or
# any room below it). examples/downstream is such a project; `make test` installs and builds it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(QTRANSIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/qtransit)
set(_qt_libs qt_numerics qt_common qt_kernels qt_reference qt_collectives qt_reports qt_gate)
set(_qt_rooms common kernels reference collectives reports gate)
if(QTRANSIT_HAVE_TESTING)
  list(APPEND _qt_libs qt_testing)
  list(APPEND _qt_rooms testing)
endif()
foreach(t IN LISTS _qt_libs)
  string(REGEX REPLACE "^qt_" "" _name ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${_name})
  target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()

install(TARGETS ${_qt_libs} EXPORT qtransitTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(room IN LISTS _qt_rooms)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${room}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/include/qtransit/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qtransit)
install(EXPORT qtransitTargets NAMESPACE qtransit:: DESTINATION ${QTRANSIT_INSTALL_CMAKEDIR})

# What the public headers and the static libraries need of their users' build: find_dependency in
# qtransitConfig.cmake, for what this build was configured with.
set(QTRANSIT_CONFIG_HAVE_CUDA ${QTRANSIT_HAVE_CUDA})
set(QTRANSIT_CONFIG_HAVE_MPI ${QTRANSIT_HAVE_MPI})
set(QTRANSIT_CONFIG_HAVE_TESTING ${QTRANSIT_HAVE_TESTING})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qtransitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/qtransitConfig.cmake INSTALL_DESTINATION ${QTRANSIT_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/qtransitConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/qtransitConfig.cmake ${PROJECT_BINARY_DIR}/qtransitConfigVersion.cmake
        DESTINATION ${QTRANSIT_INSTALL_CMAKEDIR})

# The build check of the public headers (CUTLASS's habit): each one compiled alone in a TU of its
# own, so that none relies on what another happened to include before it. detail/ headers are parts
# of a public one, not included alone.
if(QTRANSIT_HEADER_CHECK)
  set(_hdr_srcs "")
  foreach(room IN LISTS _qt_rooms)
    file(GLOB_RECURSE _hdrs RELATIVE ${PROJECT_SOURCE_DIR}/${room}/include CONFIGURE_DEPENDS
         ${PROJECT_SOURCE_DIR}/${room}/include/*.hpp ${PROJECT_SOURCE_DIR}/${room}/include/*.h)
    list(FILTER _hdrs EXCLUDE REGEX "(^|/)detail/")  # implementation parts, included by their public header
    foreach(h IN LISTS _hdrs)
      string(MAKE_C_IDENTIFIER ${h} _id)
      set(_src ${PROJECT_BINARY_DIR}/header_check/${_id}.cpp)
      file(CONFIGURE OUTPUT ${_src} CONTENT "#include \"${h}\"  // compiled alone: it must include what it uses\n")
      list(APPEND _hdr_srcs ${_src})
    endforeach()
  endforeach()
  add_library(qt_header_check OBJECT ${_hdr_srcs})
  target_link_libraries(qt_header_check PRIVATE qt_gate $<$<BOOL:${QTRANSIT_HAVE_TESTING}>:qt_testing>)
  # As an installed package's user compiles them (qt_kernels's INSTALL_INTERFACE): cuda_check.hpp
  # then includes <cuda_runtime.h>, from the toolkit's include folder.
  if(QTRANSIT_HAVE_CUDA)
    target_compile_definitions(qt_header_check PRIVATE QTRANSIT_HAVE_CUDA=1)
    target_link_libraries(qt_header_check PRIVATE CUDA::cudart_static)
  else()
    target_compile_definitions(qt_header_check PRIVATE QTRANSIT_HAVE_CUDA=0)
  endif()
endif()
