#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run_two.sh EXAMPLE - runs EXAMPLE as a target in the background, reads the
# address it prints, runs EXAMPLE as the initiator against it; fails unless
# both exit 0.
set -u
ex=$1
out=$(mktemp) || exit 1
trap 'rm -f "$out"; [ -n "${tpid:-}" ] && kill $tpid 2>/dev/null' EXIT
"$ex" target 127.0.0.1:0 >"$out" 2>&1 &
tpid=$!
i=0
while ! grep -q '^listening on ' "$out" && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
addr=$(sed -n 's/^listening on //p' "$out")
[ -n "$addr" ] || { echo "the target printed no address:"; cat "$out"; exit 1; }
"$ex" initiator "$addr"
irc=$?
wait $tpid
trc=$?
tpid=
cat "$out"
echo "initiator exit $irc, target exit $trc"
[ $irc = 0 ] && [ $trc = 0 ]
