#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# weight_sync_smoke.sh BUILD_DIR [PYTHON] - weight_sync.py on host memory with
# the small preset: gpuwire's tcp and intra rows and the torch (gloo) row
# measured with every tensor bit-exact on the receivers, the checkpoint-engine
# columns measured or skipped with a reason; then a run whose receivers flip
# one bit after the first round must fail with a mismatch naming the tensor.
# Needs a Python with torch (else skipped, exit 77) and libgpuwire.
b=$1; py=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
command -v "$py" >/dev/null 2>&1 || { echo "SKIP: no $py"; exit 77; }
"$py" -c "import torch" 2>/dev/null || { echo "SKIP: $py has no torch (weight_sync.py moves torch tensors)"; exit 77; }
out=$(mktemp -d /tmp/gw-ws-smoke.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT
fail=0
"$py" "$here/weight_sync.py" --cpu --preset tiny --transports tcp,intra --build "$b" \
  --out "$out/a" --timeout 120 --column-timeout 240 >"$out/a.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: weight_sync.py exited $rc"; tail -30 "$out/a.log"; exit 1; }
for row in gpuwire/tcp gpuwire/intra torch; do
  grep -Eq "^\| $row \| [^|]+ \|.* \| ok: 39 tensors x 1 receivers x 4 rounds bit-exact \|$" "$out/a/weight_sync.txt" ||
    { echo "FAIL: no bit-exact $row row"; fail=1; }
done
for col in ce-nccl ce-p2p; do
  grep -Eq "^\| $col(/[^ ]+)? \| (skipped: .+|[^|]+ \|.* \| ok: .*) \|" "$out/a/weight_sync.txt" ||
    { echo "FAIL: $col is neither measured nor skipped with a reason"; fail=1; }
done
grep -E "^\| (gpuwire|torch|ce-)" "$out/a/weight_sync.txt"
"$py" "$here/weight_sync.py" --cpu --preset tiny --peers gpuwire --transports intra --build "$b" \
  --selftest-corrupt --out "$out/c" --timeout 120 --column-timeout 240 >"$out/c.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
  echo "FAIL: a flipped bit on a receiver went unnoticed"; fail=1
elif ! grep -q "MISMATCH: receiver 1 round 1: 1 tensors differ (model.layers.0.input_layernorm.weight)" \
    "$out/c/weight_sync.txt"; then
  echo "FAIL: the flipped bit was not reported as a mismatch of that tensor"; tail -20 "$out/c.log"; fail=1
else
  echo "flipped bit detected: $(grep -o 'MISMATCH[^|]*' "$out/c/weight_sync.txt")"
fi
[ $fail -eq 0 ] && echo "weight sync smoke: ok"
exit $fail
