#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# smoke.sh BUILD_DIR [PYTHON] - runs peers_bench.py in its quick mode and
# checks its report: every peer is either measured or skipped with a reason,
# gpuwire's own tcp and intra rows are measured, and the CSV holds gpuwire's
# rows for every shape.  Needs nothing beyond a Python 3 and libgpuwire.
b=$1; py=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
[ -n "$py" ] || py=python3
command -v "$py" >/dev/null 2>&1 || { echo "SKIP: no $py"; exit 77; }
out=$(mktemp -d /tmp/gw-peers-smoke.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT
"$py" "$here/peers_bench.py" --quick --rounds 1 --build "$b" --out "$out" --timeout 300
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: peers_bench.py exited $rc"; tail -40 "$out/peers.log"; exit 1; }
fail=0
for p in mooncake nixl uccl; do
  if ! grep -Eq "^$p +[^ ]+ +(measured \(|skipped: .+)" "$out/peers.txt"; then
    echo "FAIL: $p is neither measured nor skipped with a reason"; fail=1
  fi
done
for t in tcp intra; do
  grep -Eq "^gpuwire +$t +measured" "$out/peers.txt" || { echo "FAIL: gpuwire $t not measured"; fail=1; }
  for s in lat8 b1_4k b256_1k b4096_16k one_64m; do
    grep -Eq "^$s,gpuwire,,$t,[0-9]" "$out/peers.csv" || { echo "FAIL: no gpuwire $t row for $s"; fail=1; }
  done
done
grep -E "^(mooncake|nixl|uccl|gpuwire) " "$out/peers.txt"
[ $fail -eq 0 ] && echo "peers smoke: ok"
exit $fail
