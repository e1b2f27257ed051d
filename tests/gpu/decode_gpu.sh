#!/usr/bin/env bash
# --decode=gpu end to end on a GPU (docs/input.md): make-dataset's JPEGs decoded by nvJPEG and
# dlbench's kernels, resnet18 in bf16 training on them from the folder and from the shards, the
# record saying where and by what they were decoded; the same run with --decode=cpu beside it
# (both throughputs printed: the device check's log keeps them). `bench input` beside them, with
# DALI's GPU pipeline where DALI is installed. Then time to accuracy over epochs with the
# training images decoded on the GPU. Exits 77 where no GPU is visible.
# Usage: decode_gpu.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
gpus=$("$dlbench" list | grep -c "^  *cuda:[0-9]")
if [[ $gpus -lt 1 ]]; then echo "no CUDA device is visible: skipped"; exit 77; fi

"$dlbench" make-dataset --out="$work/ds" --images=512 --val-images=128 --classes=4 \
  --size=400x350 --shards=2 >"$work/make.log" 2>&1 || { cat "$work/make.log"; exit 1; }
common=(--backend=cuda --model=resnet18 --precision=bf16 --batch=64 --image-size=224 --steps=12
        --warmup=3 --loader-threads=4)
for source in folder shards; do
  path=$work/ds
  [[ $source == shards ]] && path="$work/ds/shards/shard-*.tar"
  for decode in gpu cpu; do
    out=$work/$source-$decode.json
    timeout 300 "$dlbench" run "${common[@]}" --data=$source --data-path="$path" --decode=$decode \
      --json="$out" >"$work/run.log" 2>&1 || { fail "$source $decode: $(tail -3 "$work/run.log")"; continue; }
    python3 - "$out" "$source" "$decode" <<'PY' || fail "$source $decode record"
import json, sys
r = json.load(open(sys.argv[1]))
source, decode = sys.argv[2], sys.argv[3]
assert r["status"] == "ok", r["status"]
i = r["metrics"]["input"]
assert i["decode"] == decode, i["decode"]
assert i["decoder"].startswith("nvjpeg" if decode == "gpu" else "libjpeg-turbo"), i["decoder"]
assert i["skipped"] == 0, i["skipped"]
if decode == "gpu":
    assert i["decode_batches"] == i["batches"] and i["decode_device_s"] > 0, i
    assert i["decoder_device_bytes"] >= 64 * 3 * 224 * 224, i  # at least the crops' sum
print(f"{source}, decode {decode} ({i['decoder']}): {r['metrics']['throughput_img_s']:.1f} img/s, "
      f"loader {i.get('loader_img_s', 0):.0f} img/s, wait {100 * i['wait_share_of_step']:.1f}% "
      f"of the step: {i['verdict']}"
      + (f"; decoding {1e3 * i['decode_per_batch_s']:.2f} ms a batch on the device, "
         f"{100 * i['decode_share_of_step']:.0f}% of the step" if decode == "gpu" else ""))
PY
  done
done

# The input pipeline alone at 224 px: the loader decoding, the GPU decoding, and DALI's GPU
# pipeline where this Python has DALI (the rates go to the log).
systems=dlbench,dlbench-gpu
python3 -c "import nvidia.dali" 2>/dev/null && systems=$systems,dali-gpu
timeout 300 "$dlbench" bench input --data-path="$work/ds" --threads=4 --batch=64 --image-size=224 \
  --batches=6 --rounds=1 --systems=$systems >"$work/bench.log" 2>&1 ||
  fail "bench input: $(tail -3 "$work/bench.log")"
cat "$work/bench.log"

# Time to accuracy with the training images decoded on the GPU (evaluation decodes on the CPU):
# the same target as folder_data.sh's on the CPU.
timeout 300 "$dlbench" run --backend=cuda --model=resnet18 --batch=16 --image-size=32 \
  --data=folder --data-path="$work/ds" --decode=gpu --epochs=10 --target-accuracy=0.8 --lr=0.02 \
  --json="$work/epochs.json" >"$work/epochs.log" 2>&1 || fail "epochs: $(tail -3 "$work/epochs.log")"
python3 - "$work/epochs.json" <<'PY' || fail "epochs record"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["metrics"]["convergence"]
print(f"training images decoded on the GPU: accuracies {c['eval_accuracy']}")
assert r["metrics"]["input"]["decode"] == "gpu"
assert c["reached"] and c["eval_accuracy"][-1] >= 0.8, c
PY

if ((failures)); then echo "$failures failure(s)"; exit 1; fi
echo "decode_gpu: all passed"
