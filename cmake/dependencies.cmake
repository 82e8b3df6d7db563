# Finds every third-party dependency and exposes it as an imported target.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# CAF: Debian's 0.17 ships neither a CMake config nor a pkg-config file.
find_package(CAF CONFIG QUIET COMPONENTS core io)
if(NOT TARGET CAF::core)
  find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
  find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
  find_library(CAF_IO_LIBRARY caf_io REQUIRED)
  add_library(CAF::core UNKNOWN IMPORTED)
  set_target_properties(CAF::core PROPERTIES IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
                                             INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR})
  add_library(CAF::io UNKNOWN IMPORTED)
  set_target_properties(CAF::io PROPERTIES IMPORTED_LOCATION ${CAF_IO_LIBRARY}
                                           INTERFACE_LINK_LIBRARIES CAF::core)
endif()

find_package(Boost 1.81 REQUIRED CONFIG COMPONENTS json)

pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)

# Debian's dnnl-config.cmake requires OpenCL (for its GPU runtime), which we
# do not use: find the library directly.
if(NOT TARGET DNNL::dnnl)
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
  find_library(DNNL_LIBRARY dnnl REQUIRED)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${DNNL_LIBRARY}
                                              INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR})
endif()

find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
if(TROUPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TROUPE_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
