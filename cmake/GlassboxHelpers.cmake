# gb_add_library(NAME SOURCES ... DEPS ... [TORCH]) : one static library per module.
# gb_add_test(NAME SOURCES ... DEPS ... LABELS ...)  : one GoogleTest binary per module.

set(GB_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)

if(GB_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# The precompiled header: LibTorch's umbrella header is the bulk of every translation unit.
function(gb_add_pch)
  file(WRITE ${CMAKE_BINARY_DIR}/gb_pch.cpp "// precompiled-header carrier\n")
  add_library(gb_pch STATIC ${CMAKE_BINARY_DIR}/gb_pch.cpp)
  target_link_libraries(gb_pch PUBLIC gb_torch)
  target_compile_options(gb_pch PRIVATE ${GB_WARNINGS})
  target_precompile_headers(gb_pch PRIVATE <torch/torch.h> <vector> <string> <memory>)
endfunction()

function(gb_add_library name)
  cmake_parse_arguments(GB "TORCH" "" "SOURCES;DEPS;EXTERNAL" ${ARGN})
  add_library(gb_${name} STATIC ${GB_SOURCES})
  target_include_directories(gb_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(gb_${name} PRIVATE ${GB_WARNINGS})
  foreach(dep IN LISTS GB_DEPS)
    target_link_libraries(gb_${name} PUBLIC gb_${dep})
  endforeach()
  target_link_libraries(gb_${name} PUBLIC ${GB_EXTERNAL})
  if(GB_TORCH)
    target_link_libraries(gb_${name} PUBLIC gb_torch)
    target_precompile_headers(gb_${name} REUSE_FROM gb_pch)
  endif()
endfunction()

function(gb_add_test name)
  if(NOT GB_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(GB "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${GB_SOURCES})
  target_compile_options(${name} PRIVATE ${GB_WARNINGS})
  foreach(dep IN LISTS GB_DEPS)
    target_link_libraries(${name} PRIVATE gb_${dep})
  endforeach()
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main gb_torch)
  target_precompile_headers(${name} REUSE_FROM gb_pch)
  if(NOT GB_LABELS)
    set(GB_LABELS unit)
  endif()
  # Binaries with unit tests: the sanitizer build (scripts/build --asan) builds only these.
  if("unit" IN_LIST GB_LABELS)
    set_property(GLOBAL APPEND PROPERTY GB_UNIT_TEST_TARGETS ${name})
  endif()
  gtest_discover_tests(${name}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    PROPERTIES LABELS "${GB_LABELS}" ENVIRONMENT "GB_SOURCE_DIR=${PROJECT_SOURCE_DIR};GB_BUILD_DIR=${CMAKE_BINARY_DIR}"
    DISCOVERY_TIMEOUT 60)
endfunction()

# gb_test_cost(TARGET COST tests...): ctest starts tests in descending COST when it has no timing
# history (a fresh clone, CI): the few long tests go first instead of running alone at the end.
# The tests are GoogleTest names discovered from TARGET; the properties are set only once its test
# list exists (a build without TARGET, e.g. the sanitizer build, skips them).
function(gb_test_cost target cost)
  if(NOT GB_BUILD_TESTS OR NOT TARGET ${target})
    return()
  endif()
  set(file ${CMAKE_CURRENT_BINARY_DIR}/${target}_cost_${cost}.cmake)
  set(text "if(EXISTS \"${CMAKE_CURRENT_BINARY_DIR}/${target}[1]_tests.cmake\")\n")
  foreach(t IN LISTS ARGN)
    string(APPEND text "  set_tests_properties(\"${t}\" PROPERTIES COST ${cost})\n")
  endforeach()
  string(APPEND text "endif()\n")
  file(WRITE ${file} "${text}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
endfunction()

# gb_no_vptr_check(files...): UBSan's vptr check makes each instrumented polymorphic access
# reference the type's typeinfo, and LibTorch does not export the typeinfo of some TorchScript
# types (c10::DynamicType): files that use torch::jit would not link in the sanitizer build.
# They keep every other ASan/UBSan check.
function(gb_no_vptr_check)
  if(GB_SANITIZE)
    set_source_files_properties(${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTIES COMPILE_OPTIONS -fno-sanitize=vptr)
  endif()
endfunction()
