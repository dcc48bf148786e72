# Finds LibTorch inside the `torch` wheel of the project's .venv (or GB_PYTHON) and defines the
# interface target gb_torch. The prefix comes from torch.utils.cmake_prefix_path, so a CUDA wheel
# and a CPU wheel are found the same way.
set(GB_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH "Python with the torch wheel")
if(NOT EXISTS "${GB_PYTHON}")
  message(FATAL_ERROR "no Python at ${GB_PYTHON}: run scripts/setup first (it creates .venv with torch)")
endif()
execute_process(
  COMMAND "${GB_PYTHON}" -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__); print(int(torch.backends.cuda.is_built()))"
  OUTPUT_VARIABLE _gb_torch_out RESULT_VARIABLE _gb_torch_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _gb_torch_rc EQUAL 0)
  message(FATAL_ERROR "${GB_PYTHON} cannot import torch: run scripts/setup")
endif()
string(REPLACE "\n" ";" _gb_torch_lines "${_gb_torch_out}")
list(GET _gb_torch_lines 0 GB_TORCH_CMAKE_PREFIX)
list(GET _gb_torch_lines 1 GB_TORCH_VERSION)
list(GET _gb_torch_lines 2 GB_TORCH_CUDA_BUILT)
get_filename_component(GB_TORCH_ROOT "${GB_TORCH_CMAKE_PREFIX}/../.." ABSOLUTE)
message(STATUS "LibTorch ${GB_TORCH_VERSION} at ${GB_TORCH_ROOT} (CUDA built: ${GB_TORCH_CUDA_BUILT})")

# The wheel's own TorchConfig.cmake insists on a matching CUDA toolkit at configure time for a
# CUDA build. We only link the prebuilt libraries, so define the target directly: headers,
# libtorch/libtorch_cpu/libc10, and (force-linked) the CUDA parts when the wheel has them.
set(_gb_lib "${GB_TORCH_ROOT}/lib")
add_library(gb_torch INTERFACE)
target_include_directories(gb_torch SYSTEM INTERFACE
  "${GB_TORCH_ROOT}/include" "${GB_TORCH_ROOT}/include/torch/csrc/api/include")
# LibTorch ships fmt 11 headers in its include directory, which shadow Debian's fmt 9 for every
# target that sees them; use them header-only so no library version has to match.
target_compile_definitions(gb_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1 FMT_HEADER_ONLY=1)
# libtorch.so and libtorch_cpu.so export their own copies of std::filesystem functions (built with
# a newer libstdc++); whichever library is loaded first wins symbol lookup, and theirs crash when
# called from our code. Linking libstdc++ ahead of them makes the system's definitions win.
set(_gb_torch_libs "-Wl,--no-as-needed" stdc++ "-Wl,--as-needed" "${_gb_lib}/libtorch.so" "${_gb_lib}/libtorch_cpu.so" "${_gb_lib}/libc10.so")
if(GB_TORCH_CUDA_BUILT AND EXISTS "${_gb_lib}/libtorch_cuda.so")
  list(APPEND _gb_torch_libs "-Wl,--no-as-needed" "${_gb_lib}/libtorch_cuda.so" "${_gb_lib}/libc10_cuda.so" "-Wl,--as-needed")
  # The CUDA runtime libraries live in the nvidia-* wheels next to torch; the linker needs to
  # see them to resolve libtorch_cuda's dependencies, the loader finds them through its RUNPATH.
  file(GLOB _gb_nv_dirs "${GB_TORCH_ROOT}/../nvidia/*/lib")
  foreach(_d IN LISTS _gb_nv_dirs)
    list(APPEND _gb_torch_libs "-Wl,-rpath-link,${_d}")
  endforeach()
  set(GB_TORCH_HAS_CUDA ON)
endif()
target_link_libraries(gb_torch INTERFACE ${_gb_torch_libs} Threads::Threads)
target_link_options(gb_torch INTERFACE "-Wl,-rpath,${_gb_lib}")
