# The libFuzzer targets' ctest tests (tests/fuzz/fuzzers.cmake lists the targets), in the normal
# build; each runs tests/fuzz/run_fuzz.sh, which builds build-fuzz/ with clang first
# (scripts/build --fuzz: a few files, ccache-shared) and exits 77 (skipped) without libFuzzer.
#   fuzz_<name>_smoke (integration): the seed corpus and regressions replayed, then
#                                    GB_FUZZ_SMOKE_SECONDS (20) of fuzzing
#   fuzz_<name>_soak  (slow):        GB_FUZZ_SOAK_SECONDS (600) of fuzzing, per target
# Scratch corpora and artifacts are under the build folder (tests/fuzz_work/); the committed
# corpus is only read.
set(GB_FUZZ_SMOKE_SECONDS 20 CACHE STRING "Seconds of fuzzing per target in the fuzz_*_smoke tests")
set(GB_FUZZ_SOAK_SECONDS 600 CACHE STRING "Seconds of fuzzing per target in the fuzz_*_soak tests (label slow)")

function(gb_fuzzer name)
  string(REGEX REPLACE "^fuzz_" "" short ${name})
  set(runner ${CMAKE_CURRENT_LIST_DIR}/run_fuzz.sh)
  set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work)
  add_test(NAME fuzz_${short}_smoke COMMAND bash ${runner} ${name} ${GB_FUZZ_SMOKE_SECONDS} ${work}/${name}_smoke)
  set_tests_properties(fuzz_${short}_smoke PROPERTIES LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77)
  add_test(NAME fuzz_${short}_soak COMMAND bash ${runner} ${name} ${GB_FUZZ_SOAK_SECONDS} ${work}/${name}_soak)
  math(EXPR soak_timeout "${GB_FUZZ_SOAK_SECONDS} + 600")
  set_tests_properties(fuzz_${short}_soak PROPERTIES LABELS slow TIMEOUT ${soak_timeout} SKIP_RETURN_CODE 77)
endfunction()

include(${CMAKE_CURRENT_LIST_DIR}/fuzzers.cmake)
