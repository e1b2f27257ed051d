#!/usr/bin/env bash
# dlbench against PyTorch on this machine's CPU, in the same run: torchvision's model trained on
# synthetic data by both (SGD, momentum 0.9, lr 0.01, fp32), alternating dlbench and PyTorch,
# ROUNDS rounds, and the medians of their images per second with the ratio. PyTorch gets every
# core this process may use, as dlbench does (reports/peers/pytorch_train.py, the peer of
# `--systems=dlbench,pytorch`). Not a test: a benchmark,
# whose figures are this machine's.
#
#   scripts/cpu-vs-pytorch.sh [ROUNDS] [MODEL:BATCH:IMAGE_SIZE ...]
#   default: 3 rounds of resnet18:16:64 and resnet50:8:64
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
shift || true
configs=("$@")
((${#configs[@]})) || configs=(resnet18:16:64 resnet50:8:64)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
dlbench=$root/build/dlbench
steps=10 warmup=3

for config in "${configs[@]}"; do
  IFS=: read -r model batch size <<<"$config"
  dl=() pt=()
  for ((r = 1; r <= rounds; r++)); do
    rec=$(mktemp)
    "$dlbench" run --model="$model" --batch="$batch" --image-size="$size" --steps=$steps \
      --warmup=$warmup --backend=cpu --json="$rec" >/dev/null
    dl+=("$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"]["throughput_img_s"])' "$rec")")
    rm -f "$rec"
    pt+=("$(/usr/bin/python3 "$root/reports/peers/pytorch_train.py" --model="$model" \
      --batch="$batch" --image-size="$size" --backend=cpu --steps=$steps --warmup=$warmup |
      /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["metrics"]["throughput_img_s"])')")
  done
  /usr/bin/python3 - "$model" "$batch" "$size" "${dl[*]}" "${pt[*]}" <<'PY'
import statistics, sys
model, batch, size, dl, pt = sys.argv[1:]
dl = [float(v) for v in dl.split()]
pt = [float(v) for v in pt.split()]
d, p = statistics.median(dl), statistics.median(pt)
print(f"{model} b{batch} {size}x{size}: dlbench {d:.1f} img/s, PyTorch {p:.1f} img/s, "
      f"ratio {d / p:.2f}x (medians of {len(dl)}; dlbench {', '.join(f'{v:.1f}' for v in dl)}; "
      f"PyTorch {', '.join(f'{v:.1f}' for v in pt)})")
PY
done
