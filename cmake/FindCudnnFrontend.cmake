# Finds cudnn-frontend, NVIDIA's header-only C++ API over cuDNN's graph API. scripts/install-deps.sh
# installs PyPI's nvidia-cudnn-frontend wheel (pinned, without its Python dependencies) into
# .venv, whose include/ holds the headers. Defines CUDNN_FRONTEND_INCLUDE_DIR.
file(GLOB _dlb_fe_hints ${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/include)
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${CUDNN_FRONTEND_ROOT} ${_dlb_fe_hints}
          NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CudnnFrontend
  REQUIRED_VARS CUDNN_FRONTEND_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "run scripts/install-deps.sh, which installs the headers into .venv")
