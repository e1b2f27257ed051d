# Finds nvJPEG (--decode=gpu): the CUDA toolkit's, or PyPI's nvidia-nvjpeg wheel that
# scripts/install-deps.sh installs (pinned, without dependencies) into .venv, under
# nvidia/cu13/{include,lib}. Optional: without it the build has no GPU decoder, and --decode=gpu
# says so. Defines NVJPEG::nvjpeg.
file(GLOB _dlb_nvjpeg_hints ${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/nvidia/cu13)
find_path(NVJPEG_INCLUDE_DIR nvjpeg.h HINTS ${NVJPEG_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
          ${_dlb_nvjpeg_hints} PATH_SUFFIXES include)
find_library(NVJPEG_LIBRARY NAMES nvjpeg libnvjpeg.so.13
             HINTS ${NVJPEG_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${_dlb_nvjpeg_hints}
             PATH_SUFFIXES lib lib64)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NVJPEG REQUIRED_VARS NVJPEG_LIBRARY NVJPEG_INCLUDE_DIR)
if(NVJPEG_FOUND AND NOT TARGET NVJPEG::nvjpeg)
  add_library(NVJPEG::nvjpeg UNKNOWN IMPORTED)
  set_target_properties(NVJPEG::nvjpeg PROPERTIES IMPORTED_LOCATION ${NVJPEG_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${NVJPEG_INCLUDE_DIR})
endif()
