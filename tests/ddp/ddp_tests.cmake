# Data-parallel training end to end through the CLI (tests/ddp/ddp_test.py): one ctest test per
# case. Each starts 2-rank jobs (the launcher, torchrun, network namespaces for two nodes).
if(TARGET glassbox)
  foreach(case equivalence_sgd equivalence_adamw equivalence_syncbn exact_eval resume torchrun faults errors multinode)
    add_test(NAME ddp_${case}
      COMMAND ${GB_PYTHON} -B ${CMAKE_CURRENT_SOURCE_DIR}/ddp/ddp_test.py
              --glassbox $<TARGET_FILE:glassbox> --case ${case} --workdir ${CMAKE_CURRENT_BINARY_DIR}/ddp/${case})
    set_tests_properties(ddp_${case} PROPERTIES LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77)
  endforeach()
  set_tests_properties(ddp_faults ddp_resume PROPERTIES COST 60)
endif()
