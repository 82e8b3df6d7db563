# troupe_library(NAME DIRS dir... [DEPS target...] [DEFINITIONS def...] [INCLUDES dir...])
# One library per top-level folder, from the *.cpp files of the listed
# folders (globbed, so adding a file needs no edit here).
function(troupe_library name)
  cmake_parse_arguments(ARG "" "" "DIRS;DEPS;DEFINITIONS;INCLUDES" ${ARGN})
  set(sources)
  foreach(dir IN LISTS ARG_DIRS)
    file(GLOB dir_sources CONFIGURE_DEPENDS ${dir}/*.cpp)
    list(APPEND sources ${dir_sources})
  endforeach()
  if(sources)
    add_library(${name} STATIC ${sources})
    target_link_libraries(${name} PUBLIC troupe_root_includes ${ARG_DEPS} PRIVATE troupe_warnings)
    set(scope PUBLIC)
  else()
    # A folder whose code is header-only so far.
    add_library(${name} INTERFACE)
    target_link_libraries(${name} INTERFACE troupe_root_includes ${ARG_DEPS})
    set(scope INTERFACE)
  endif()
  if(ARG_DEFINITIONS)
    target_compile_definitions(${name} ${scope} ${ARG_DEFINITIONS})
  endif()
  if(ARG_INCLUDES)
    target_include_directories(${name} ${scope} ${ARG_INCLUDES})
  endif()
endfunction()

# troupe_test_suite(NAME DIR [DEPS target...] [LABELS label...])
# One GoogleTest executable from the *.cpp files in DIR; every test is
# registered with CTest.
function(troupe_test_suite name)
  cmake_parse_arguments(ARG "" "DIR" "DEPS;LABELS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${ARG_DIR}/*.cpp)
  if(NOT sources)
    return()  # the area has no tests yet
  endif()
  add_executable(${name} ${sources})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main troupe_warnings)
  target_compile_definitions(${name} PRIVATE
    TROUPE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" TROUPE_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures"
    TROUPE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(labels ${ARG_LABELS})
  if(NOT labels)
    set(labels cpu)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${labels}")
endfunction()
