# libtpcomm: the one library a program links (tpcomm::tpcomm), made of the layers' objects, and its
# installation: public headers, library, the tpcomm CLI, a CMake package and a pkg-config file
# (docs/packaging.md). Everything the library uses besides the C++ standard library (fmt, Gloo,
# OpenSSL, hwloc, MPI, the CUDA runtime) is private to it: the public headers include none of them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_tpcomm_layers tpcomm_common tpcomm_facts tpcomm_plan tpcomm_probe tpcomm_control
    tpcomm_kernels tpcomm_transport tpcomm_runtime tpcomm_cuda_common)
if(TPCOMM_CUDA_ENABLED)
  list(APPEND _tpcomm_layers tpcomm_cuda tpcomm_cuda_kernels)
endif()
set(_tpcomm_objects "")
foreach(_layer IN LISTS _tpcomm_layers)
  list(APPEND _tpcomm_objects $<TARGET_OBJECTS:${_layer}>)
endforeach()

if(TPCOMM_BUILD_SHARED)
  add_library(tpcomm_library SHARED ${_tpcomm_objects})
  set_target_properties(tpcomm_library PROPERTIES VERSION ${PROJECT_VERSION}
                                                  SOVERSION ${PROJECT_VERSION_MAJOR})
else()
  add_library(tpcomm_library STATIC ${_tpcomm_objects})
endif()
add_library(tpcomm::tpcomm ALIAS tpcomm_library)
set_target_properties(tpcomm_library PROPERTIES OUTPUT_NAME tpcomm EXPORT_NAME tpcomm
                                                ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib
                                                LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
target_include_directories(tpcomm_library PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# The public headers are C++17 (tests/packaging/consumer_test.sh compiles each alone as C++17).
target_compile_features(tpcomm_library INTERFACE cxx_std_17)
set(_tpcomm_private fmt::fmt Threads::Threads OpenSSL::Crypto gloo PkgConfig::HWLOC rt
    ${CMAKE_DL_LIBS})
set(_tpcomm_pc_private "-lfmt -lgloo -lcrypto -lhwloc -lrt -ldl -pthread")
# No libmpi: the MPI bootstrap opens the plug-in libtpcomm_mpi.so when it is used
# (src/CMakeLists.txt).
if(TPCOMM_CUDA_ENABLED)
  list(APPEND _tpcomm_private CUDA::cudart_static)
endif()
target_link_libraries(tpcomm_library PRIVATE ${_tpcomm_private})
if(TPCOMM_SANITIZE)
  target_link_options(tpcomm_library PUBLIC -fsanitize=address,undefined)
endif()

# Installation.
install(TARGETS tpcomm_library EXPORT tpcommTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tpcomm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/generated/tpcomm/version.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tpcomm)
set(_tpcomm_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tpcomm)
install(EXPORT tpcommTargets NAMESPACE tpcomm:: DESTINATION ${_tpcomm_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tpcommConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tpcommConfig.cmake INSTALL_DESTINATION ${_tpcomm_cmake_dir})
# 0.x: a minor version may break the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tpcommConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tpcommConfig.cmake ${PROJECT_BINARY_DIR}/tpcommConfigVersion.cmake
  DESTINATION ${_tpcomm_cmake_dir})
file(RELATIVE_PATH _tpcomm_pc_up /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${PROJECT_SOURCE_DIR}/cmake/tpcomm.pc.in ${PROJECT_BINARY_DIR}/tpcomm.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tpcomm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
