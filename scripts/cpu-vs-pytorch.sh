#!/usr/bin/env bash
# dlbench against PyTorch on this machine's CPU, in the same run: torchvision's model trained on
# synthetic data by both (SGD, momentum 0.9, lr 0.01), in fp32 or bf16 (PyTorch's CPU autocast;
# dlbench's record says whether its bf16 products ran natively, metrics.arithmetic). Each round
# runs every configuration once, dlbench then PyTorch, so configurations and systems alternate;
# after ROUNDS rounds it prints the medians of their images per second, the lowest and highest
# round, and the ratio. PyTorch gets every core this process may use, as dlbench does
# (reports/peers/pytorch_train.py, the peer of `--systems=dlbench,pytorch`). Not a test: a
# benchmark, whose figures are this machine's.
#
#   scripts/cpu-vs-pytorch.sh [ROUNDS] [MODEL:BATCH:IMAGE_SIZE[:PRECISION] ...]
#   default: 3 rounds of resnet18:16:64 and resnet50:8:64, in fp32
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
shift || true
configs=("$@")
((${#configs[@]})) || configs=(resnet18:16:64 resnet50:8:64)
for config in "${configs[@]}"; do
  IFS=: read -r _ _ _ precision <<<"$config"
  case ${precision:-fp32} in
    fp32 | bf16) ;;
    *) echo "cpu-vs-pytorch.sh: $config: the CPU peer compares fp32 and bf16 only" >&2; exit 2 ;;
  esac
done
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
dlbench=$root/build/dlbench
steps=10 warmup=3
results=$(mktemp)
trap 'rm -f "$results"' EXIT

images_per_s() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["metrics"]["throughput_img_s"])'; }

for ((r = 1; r <= rounds; r++)); do
  for config in "${configs[@]}"; do
    IFS=: read -r model batch size precision <<<"$config"
    precision=${precision:-fp32}
    common=(--model="$model" --batch="$batch" --image-size="$size" --steps=$steps
            --warmup=$warmup --backend=cpu --precision="$precision")
    rec=$(mktemp)
    "$dlbench" run "${common[@]}" --json="$rec" >/dev/null
    echo "$config dlbench $(images_per_s <"$rec")" >>"$results"
    rm -f "$rec"
    echo "$config pytorch $(/usr/bin/python3 "$root/reports/peers/pytorch_train.py" "${common[@]}" |
                            tail -n 1 | images_per_s)" >>"$results"
  done
done
/usr/bin/python3 - "$results" "${configs[@]}" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    config, system, rate = line.split()
    runs[config, system].append(float(rate))
for config in sys.argv[2:]:
    model, batch, size, *precision = config.split(":")
    d, p = runs[config, "dlbench"], runs[config, "pytorch"]
    md, mp = statistics.median(d), statistics.median(p)
    print(f"{model} b{batch} {size}x{size} {(precision or ['fp32'])[0]}: dlbench {md:.1f} img/s "
          f"[{min(d):.1f}, {max(d):.1f}], PyTorch {mp:.1f} img/s [{min(p):.1f}, {max(p):.1f}], "
          f"ratio {md / mp:.2f}x (medians of {len(d)} rounds)")
PY
