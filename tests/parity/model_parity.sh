#!/usr/bin/env bash
# Model-level parity, pass by pass against PyTorch in float64 (model_parity.py), for resnet18,
# resnet50, vgg16 and alexnet at two image sizes each, batch 4, with each CPU convolution
# algorithm; then a planted error, which must fail. `--quick`: issue 25's two cases only (alexnet
# at 64 px, resnet18 at 96 px), as ctest runs it. Usage: model_parity.sh DLBENCH [--quick]
set -u
dlbench=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$here/../integration/check.sh"
cases="resnet18:64 resnet18:96 resnet50:64 resnet50:96 vgg16:32 vgg16:64 alexnet:63 alexnet:64"
[[ ${2:-} == --quick ]] && cases="alexnet:64 resnet18:96"
for case in $cases; do
  for algo in im2col onednn; do
    check "${case/:/ }px $algo" /usr/bin/python3 "$here/model_parity.py" "$dlbench" "$work" \
      --model="${case%:*}" --image-size="${case#*:}" --conv-algo="$algo"
  done
done
! /usr/bin/python3 "$here/model_parity.py" "$dlbench" "$work" --model=resnet18 --image-size=32 \
  --plant="grad of layer3.0.conv1" >"$work/planted" 2>&1
check "a planted 1% error in one gradient element fails" test $? -eq 0
check "... naming it" grep -q "FAILED grad of layer3.0.conv1\[" "$work/planted"
check_summary model_parity
