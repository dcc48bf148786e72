# OpenCV's core, imgproc and imgcodecs from Debian's per-module -dev packages. Their CMake
# package config ships only with the libopencv-dev meta package, which pulls every module (and
# VTK, Qt, GDAL); the three libraries glassbox uses are found directly instead and given the
# target names OpenCV's own config defines (opencv_core, opencv_imgproc, opencv_imgcodecs).
find_path(GB_OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
foreach(_gb_cv_module core imgproc imgcodecs)
  find_library(GB_OPENCV_${_gb_cv_module}_LIBRARY opencv_${_gb_cv_module} REQUIRED)
  if(NOT TARGET opencv_${_gb_cv_module})
    add_library(opencv_${_gb_cv_module} SHARED IMPORTED GLOBAL)
    set_target_properties(opencv_${_gb_cv_module} PROPERTIES
      IMPORTED_LOCATION ${GB_OPENCV_${_gb_cv_module}_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${GB_OPENCV_INCLUDE_DIR})
  endif()
endforeach()
file(STRINGS ${GB_OPENCV_INCLUDE_DIR}/opencv2/core/version.hpp _gb_cv_major REGEX "#define CV_VERSION_MAJOR")
if(NOT _gb_cv_major MATCHES "CV_VERSION_MAJOR +4")
  message(FATAL_ERROR "glassbox needs OpenCV 4 (found: ${_gb_cv_major}); scripts/setup installs Debian's 4.6")
endif()
