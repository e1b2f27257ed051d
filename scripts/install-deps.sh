#!/usr/bin/env bash
# Installs every Debian package dlbench needs, and the Python packages of reports/ and ci/
# (matplotlib, numpy, scipy, jsonschema, pytest, mlperf-logging) into .venv. Idempotent, and silent when everything is already present.
# The CUDA toolkit (nvcc, cuDNN, cuBLAS, NCCL) is expected at /usr/local/cuda and is optional.
#
#   scripts/install-deps.sh          the above
#   scripts/install-deps.sh --dali   also NVIDIA DALI (about 700 MB) into .venv-dali, for `dlbench
#                                    bench input --systems=...,dali` (docs/input.md); optional
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dali=0
case ${1:-} in
  "") ;;
  --dali) dali=1 ;;
  *) echo "install-deps: unknown option '$1' (--dali, or nothing)" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ccache git pkg-config     # toolchain
  clang-format                                    # the format the tests check (.clang-format)
  libopenblas-openmp-dev zlib1g-dev               # CPU backend: sgemm (OpenMP build); gzip
  libturbojpeg0-dev libjpeg62-turbo-dev           # JPEG files (make-dataset, input pipeline)
  libdnnl-dev                                     # CPU backend: oneDNN convolutions
  libfmt-dev nlohmann-json3-dev libcli11-dev      # formatting, JSON, command line
  libgtest-dev libgmock-dev libbenchmark-dev      # tests and micro-benchmarks
  clang libclang-rt-14-dev                        # libFuzzer and its sanitizers (tests/fuzz)
  python3 python3-venv                            # reports and test drivers
  python3-torch python3-torchvision               # PyTorch 1.13 (CPU): the parity peer
  python3-sklearn                                 # ships digits.csv.gz, the real data set
  python3-jsonschema                              # checks suites and records in tests
  libopenmpi-dev openmpi-bin                      # MPI communicator, mpirun
  xz-utils                                        # packs the GPU machine's bundle (device-bundle.sh)
  chromium                                        # renders a report as a reader sees it (tests)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

digits=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
[[ -f $digits ]] || { echo "install-deps: $digits is missing after installing python3-sklearn" >&2; exit 1; }

# Python packages from PyPI, into a venv, when (and only when) their list changes.
req=$root/reports/requirements.txt
if [[ -f $req ]]; then
  stamp=$root/.venv/.requirements.sha256
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    echo "install-deps: installing Python requirements into .venv (reports/requirements.txt)"
    py=/usr/bin/python3
    [[ -x $py ]] || py=python3
    "$py" -m venv "$root/.venv"
    "$root/.venv/bin/pip" install -q --disable-pip-version-check -r "$req" || {
      echo "install-deps: pip could not install reports/requirements.txt (is PyPI reachable?)" >&2
      exit 1
    }
    echo "$want" >"$stamp"
  fi
fi

# cudnn-frontend's headers, for the CUDA backend's cuDNN graphs, where the CUDA toolkit is. PyPI's
# wheel ships them under include/; its Python dependencies are large and not needed (--no-deps).
cudnn_frontend=1.32.0
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  fe_stamp=$root/.venv/.cudnn-frontend-$cudnn_frontend
  if [[ ! -f $fe_stamp ]]; then
    echo "install-deps: installing cudnn-frontend $cudnn_frontend headers into .venv"
    [[ -x $root/.venv/bin/pip ]] || /usr/bin/python3 -m venv "$root/.venv"
    "$root/.venv/bin/pip" install -q --disable-pip-version-check --no-deps \
      "nvidia-cudnn-frontend==$cudnn_frontend" || {
      echo "install-deps: pip could not install nvidia-cudnn-frontend (is PyPI reachable?)" >&2
      exit 1
    }
    touch "$fe_stamp"
  fi
  # nvJPEG, for --decode=gpu (the toolkit here has none): PyPI's wheel, its header and library,
  # the release of the CUDA toolkit dlbench is built with.
  nvjpeg=13.0.4.44
  nvjpeg_stamp=$root/.venv/.nvjpeg-$nvjpeg
  if [[ ! -f $nvjpeg_stamp ]]; then
    echo "install-deps: installing nvJPEG $nvjpeg into .venv"
    "$root/.venv/bin/pip" install -q --disable-pip-version-check --no-deps \
      "nvidia-nvjpeg==$nvjpeg" || {
      echo "install-deps: pip could not install nvidia-nvjpeg (is PyPI reachable?)" >&2
      exit 1
    }
    touch "$nvjpeg_stamp"
  fi
fi

# NVIDIA DALI, for the input peer (reports/peers/dali_input.py): only when asked (--dali). Its CPU
# pipeline runs without a GPU.
dali_version=2.4.0
if ((dali)); then
  dali_stamp=$root/.venv-dali/.dali-$dali_version
  if [[ ! -f $dali_stamp ]]; then
    echo "install-deps: installing NVIDIA DALI $dali_version into .venv-dali"
    /usr/bin/python3 -m venv "$root/.venv-dali"
    "$root/.venv-dali/bin/pip" install -q --disable-pip-version-check \
      "nvidia-dali-cuda130==$dali_version" || {
      echo "install-deps: pip could not install nvidia-dali-cuda130 (is PyPI reachable?)" >&2
      exit 1
    }
    touch "$dali_stamp"
  fi
fi
