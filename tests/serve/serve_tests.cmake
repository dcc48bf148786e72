# glassbox serve end to end (tests/serve/*.py): real clients against the real binary.
#   reference:   tritonclient.http (metadata, config, JSON + binary inference cross-checked against
#                Python torch, statistics, repository control with an API key); perf_analyzer sweeps;
#                tritonclient.grpc (sync, async, aio, streaming; against torch and HTTP bitwise,
#                statistics, repository control) and perf_analyzer -i grpc; the gRPC .proto
#                against tritonclient's descriptors
#   integration: 60+ bad requests over raw HTTP; Prometheus scraping /metrics + promtool;
#                SIGTERM/SIGINT under load; startup with broken models (--exit-on-error, exit codes);
#                the raw-input platform "glassbox" of a tabular model against Python torch, and of an
#                image model fed JPEG bytes against glassbox predict; monitoring of the quickstart's
#                model under shifted traffic (alarms at /monitor and on /metrics), its generated
#                Prometheus rules (promtool check/test, alerts firing in a real Prometheus) and
#                the dashboard's queries answered; /dashboard in headless Chromium
#   slow:        a 10-minute soak (RSS growth, no failed request)
# Each script builds its own model repository (Python torch.jit.script) under WORKDIR and starts
# `glassbox serve` on ephemeral ports. The tests share one RESOURCE_LOCK: each loads the 2-core
# machine on its own. Exit code 77 = skipped (a tool missing on this machine).
if(TARGET glassbox)
  set(_gb_serve_dir ${CMAKE_CURRENT_LIST_DIR})
  set(_gb_serve_work ${CMAKE_CURRENT_BINARY_DIR}/serve)
  # name  label  timeout(s)
  set(_gb_serve_tests
      "serve_tritonclient tritonclient_test reference 240"
      "serve_bad_input bad_input_test integration 180"
      "serve_http_framing http_framing_test integration 240"
      "serve_perf_analyzer perf_analyzer_test reference 300"
      "serve_grpc grpc_test reference 400"
      "serve_grpc_proto grpc_proto_test reference 60"
      "serve_prometheus prometheus_test integration 180"
      "serve_shutdown shutdown_test integration 240"
      "serve_startup startup_test integration 240"
      "serve_raw_platform raw_platform_test integration 240"
      "serve_image_platform image_platform_test integration 400"
      "serve_monitor monitor_test integration 400"
      "serve_monitor_prometheus monitor_prometheus_test integration 400"
      "serve_dashboard_browser dashboard_browser_test integration 300"
      "serve_soak serve_soak slow 900")
  foreach(_t IN LISTS _gb_serve_tests)
    separate_arguments(_t)
    list(GET _t 0 _name)
    list(GET _t 1 _script)
    list(GET _t 2 _label)
    list(GET _t 3 _timeout)
    add_test(NAME ${_name}
      COMMAND ${GB_PYTHON} -B ${_gb_serve_dir}/${_script}.py
              --glassbox $<TARGET_FILE:glassbox> --workdir ${_gb_serve_work}/${_name})
    set_tests_properties(${_name} PROPERTIES LABELS ${_label} TIMEOUT ${_timeout}
                         SKIP_RETURN_CODE 77 RESOURCE_LOCK glassbox_serve COST 30)
  endforeach()
endif()
