#!/usr/bin/env bash
# dlbench against PyTorch on this machine's CPU, in the same run: torchvision's model trained on
# synthetic data by both (SGD, momentum 0.9, lr 0.01), in fp32 or bf16 (PyTorch's CPU autocast;
# dlbench's record says whether its bf16 products ran natively, metrics.arithmetic). Each round
# runs every configuration once, dlbench then PyTorch, so configurations and systems alternate;
# after ROUNDS rounds it prints the medians of their images per second, the lowest and highest
# round, and the ratio; then the median of each run's fastest step, and their ratio, which a host
# whose speed changes between and within runs moves less. PyTorch gets every core this process may use, as dlbench does
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

# A record's images per second and its fastest timed step, in seconds.
rate_and_fastest() {
  /usr/bin/python3 -c 'import json,sys; m = json.load(sys.stdin)["metrics"]
print(m["throughput_img_s"], min(m["step_time_s"]["all"]))'
}

for ((r = 1; r <= rounds; r++)); do
  for config in "${configs[@]}"; do
    IFS=: read -r model batch size precision <<<"$config"
    precision=${precision:-fp32}
    common=(--model="$model" --batch="$batch" --image-size="$size" --steps="$steps"
            --warmup="$warmup" --backend=cpu --precision="$precision")
    rec=$(mktemp)
    "$dlbench" run "${common[@]}" --json="$rec" >/dev/null
    echo "$config dlbench $(rate_and_fastest <"$rec")" >>"$results"
    rm -f "$rec"
    echo "$config pytorch $(/usr/bin/python3 "$root/reports/peers/pytorch_train.py" "${common[@]}" |
                            tail -n 1 | rate_and_fastest)" >>"$results"
  done
done
/usr/bin/python3 - "$results" "${configs[@]}" <<'PY'
import collections, statistics, sys
runs, fastest = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    config, system, rate, step = line.split()
    runs[config, system].append(float(rate))
    fastest[config, system].append(float(step) * 1000)
for config in sys.argv[2:]:
    model, batch, size, *precision = config.split(":")
    d, p = runs[config, "dlbench"], runs[config, "pytorch"]
    md, mp = statistics.median(d), statistics.median(p)
    name = f"{model} b{batch} {size}x{size} {(precision or ['fp32'])[0]}"
    print(f"{name}: dlbench {md:.1f} img/s [{min(d):.1f}, {max(d):.1f}], PyTorch {mp:.1f} img/s "
          f"[{min(p):.1f}, {max(p):.1f}], ratio {md / mp:.2f}x (medians of {len(d)} rounds)")
    fd, fp = fastest[config, "dlbench"], fastest[config, "pytorch"]
    sd, sp = statistics.median(fd), statistics.median(fp)
    print(f"{' ' * len(name)}  fastest step: dlbench {sd:.1f} ms [{min(fd):.1f}, {max(fd):.1f}], "
          f"PyTorch {sp:.1f} ms [{min(fp):.1f}, {max(fp):.1f}], ratio {sp / sd:.2f}x "
          f"(medians of each run's fastest)")
PY
