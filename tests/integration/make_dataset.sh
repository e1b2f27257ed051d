#!/usr/bin/env bash
# `dlbench make-dataset`: a small generated set read by the readers it is made for. torchvision's
# ImageFolder finds every class and image, with the labels of the folder names; PIL decodes every
# file at its size; Python's tarfile reads the shards, each sample a key.jpg (the folder file's
# bytes) beside a key.cls (its label). The same seed writes the same bytes, and a folder that
# exists is refused with one line and left as it was. Usage: make_dataset.sh path/to/dlbench
set -u
dlbench=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

args=(--images=24 --val-images=8 --classes=4 --size=64x48 --shards=3 --seed=5)
"$dlbench" make-dataset --out="$work/a" "${args[@]}" >"$work/a.log" 2>&1 || fail "make-dataset exited non-zero: $(cat "$work/a.log")"
grep -q "24 training images (4 classes" "$work/a.log" || fail "no summary: $(cat "$work/a.log")"
"$dlbench" make-dataset --out="$work/b" "${args[@]}" >/dev/null 2>&1 || fail "the second run failed"
diff -r "$work/a" "$work/b" >/dev/null || fail "the same seed wrote different bytes"

# Peers read it as they read ImageNet: PyTorch's ImageFolder and PIL (Debian's python3-torchvision).
py=/usr/bin/python3
if "$py" -c "import torchvision" 2>/dev/null; then
  "$py" - "$work/a" <<'PY' || fail "the readers disagree"
import io, os, sys, tarfile
from PIL import Image
from torchvision.datasets import ImageFolder
root = sys.argv[1]
train = ImageFolder(os.path.join(root, "train"))
assert train.classes == ["class_000", "class_001", "class_002", "class_003"], train.classes
assert len(train) == 24 and len(ImageFolder(os.path.join(root, "val"))) == 8
by_index = {}
for path, label in train.samples:
    index = int(os.path.basename(path).split("_")[-1].split(".")[0])
    assert label == index % 4, (path, label)          # image i is class i % K
    with Image.open(path) as im:
        assert im.format == "JPEG" and im.mode == "RGB", (path, im.format, im.mode)
        w, h = im.size
        assert 38 <= w <= 90 and 28 <= h <= 68, (path, im.size)   # 0.6-1.4 x 64x48
        im.load()
    by_index[index] = (path, label)
samples = 0
for s in range(3):
    with tarfile.open(os.path.join(root, "shards", f"shard-{s:06d}.tar")) as tar:
        names = tar.getnames()
        keys = sorted({n.split(".")[0] for n in names})
        assert names == [f"{k}.{e}" for k in keys for e in ("jpg", "cls")], names
        for k in keys:
            path, label = by_index[int(k)]
            assert tar.extractfile(f"{k}.jpg").read() == open(path, "rb").read(), k
            assert int(tar.extractfile(f"{k}.cls").read()) == label, k
            samples += 1
assert samples == 24, samples
print(f"ImageFolder, PIL and tarfile read {len(train)} images of {len(train.classes)} classes, {samples} in 3 shards")
PY
else
  echo "SKIP: the readers' check (no torchvision for $py)"
fi

# An existing folder: refused, untouched, nothing partial left beside it.
before=$(find "$work/a" -type f | sort | xargs md5sum | md5sum)
if "$dlbench" make-dataset --out="$work/a" "${args[@]}" >"$work/err" 2>&1; then
  fail "an existing folder was written over"
fi
[[ $(wc -l <"$work/err") -eq 1 ]] || fail "not one line: $(cat "$work/err")"
[[ $(find "$work/a" -type f | sort | xargs md5sum | md5sum) == "$before" ]] || fail "the existing folder changed"
for bad in --classes=0 --images=3 --size=40 --size=8x9000 --quality=0 --shards=25; do
  if "$dlbench" make-dataset --out="$work/bad" "${args[@]}" $bad >"$work/err" 2>&1; then
    fail "$bad was accepted"
  fi
  [[ -e $work/bad ]] && fail "$bad left $work/bad"
done
ls -a "$work" | grep -q partial && fail "a partial folder was left"
[[ $failures -eq 0 ]]
