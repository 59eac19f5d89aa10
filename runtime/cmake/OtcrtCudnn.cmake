# Decides whether libotcrt_cuda's bfloat16 attention can use cuDNN's fused
# SDPA (cuda/attention_cudnn.cpp): it needs cudnn.h, libcudnn and the
# header-only cudnn-frontend (scripts/fetch-cudnn-frontend.sh puts it in
# .deps/cudnn-frontend/include; OTCRT_CUDNN_FRONTEND_INCLUDE_DIR overrides).
# Included by runtime/CMakeLists.txt once the CUDA toolkit is found. Sets
# OTCRT_HAVE_CUDNN, OTCRT_CUDNN_INCLUDE_DIR, OTCRT_CUDNN_LIBRARY and
# OTCRT_CUDA_LINK_ARGS (what a program linking libotcrt_cuda.a adds after
# it: -L and -l for libcudnn and libnvrtc, which the frontend calls), and
# prints one status line. libcuda is not linked: the frontend reaches the
# driver through cudaGetDriverEntryPoint, so a program still starts (--help)
# on a machine without a driver, as the link check test runs it.
option(OTCRT_WITH_CUDNN "Use cuDNN's fused attention when it is found" ON)

set(OTCRT_HAVE_CUDNN OFF)
set(OTCRT_CUDA_LINK_ARGS "")
set(_otcrt_cudnn_missing "")

find_path(OTCRT_CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_PATH
  PATH_SUFFIXES include)
find_library(OTCRT_CUDNN_LIBRARY cudnn
  HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_PATH
  PATH_SUFFIXES lib64 lib)
find_path(OTCRT_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
  HINTS ${CMAKE_CURRENT_LIST_DIR}/../../.deps/cudnn-frontend/include
  NO_DEFAULT_PATH)

if(NOT OTCRT_WITH_CUDNN)
  set(_otcrt_cudnn_missing "OTCRT_WITH_CUDNN is OFF")
elseif(NOT OTCRT_CUDNN_INCLUDE_DIR OR NOT OTCRT_CUDNN_LIBRARY)
  set(_otcrt_cudnn_missing "cudnn.h or libcudnn not found")
elseif(NOT OTCRT_CUDNN_FRONTEND_INCLUDE_DIR)
  set(_otcrt_cudnn_missing
    "no cudnn-frontend headers: run scripts/fetch-cudnn-frontend.sh")
elseif(NOT TARGET CUDA::nvrtc)
  set(_otcrt_cudnn_missing "libnvrtc not found")
endif()

if(_otcrt_cudnn_missing STREQUAL "")
  set(OTCRT_HAVE_CUDNN ON)
  set(_otcrt_libs ${OTCRT_CUDNN_LIBRARY})
  get_target_property(_lib CUDA::nvrtc IMPORTED_LOCATION)
  list(APPEND _otcrt_libs ${_lib})
  # -L<dir> -l<name> for each, directories once.
  set(_otcrt_dirs "")
  set(_otcrt_names "")
  foreach(_lib IN LISTS _otcrt_libs)
    get_filename_component(_dir ${_lib} DIRECTORY)
    get_filename_component(_name ${_lib} NAME_WE)
    string(REGEX REPLACE "^lib" "" _name ${_name})
    list(APPEND _otcrt_dirs -L${_dir})
    list(APPEND _otcrt_names -l${_name})
  endforeach()
  list(REMOVE_DUPLICATES _otcrt_dirs)
  set(OTCRT_CUDA_LINK_ARGS ${_otcrt_dirs} ${_otcrt_names})
  file(STRINGS ${OTCRT_CUDNN_INCLUDE_DIR}/cudnn_version.h _otcrt_cudnn_version
    REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  string(REGEX REPLACE "[^0-9;]" "" _otcrt_cudnn_version
    "${_otcrt_cudnn_version}")
  string(REPLACE ";" "." _otcrt_cudnn_version "${_otcrt_cudnn_version}")
  set(_otcrt_frontend_version "")
  if(EXISTS ${OTCRT_CUDNN_FRONTEND_INCLUDE_DIR}/../VERSION)
    file(STRINGS ${OTCRT_CUDNN_FRONTEND_INCLUDE_DIR}/../VERSION
      _otcrt_frontend_version LIMIT_COUNT 1)
  endif()
  message(STATUS "otcrt: bfloat16 attention uses cuDNN SDPA (cuDNN "
    "${_otcrt_cudnn_version}, cudnn-frontend ${_otcrt_frontend_version})")
else()
  message(STATUS "otcrt: cuDNN attention disabled (${_otcrt_cudnn_missing}); "
    "attention runs on otcrt's own kernels")
endif()
