#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tool_smoke.sh GPUWIRE SETTINGS_DEF - the gpuwire tool end to end:
# `info` is a summary (the tcp transport, the settings taken from the
# environment) and `info --settings` / `--all` list every setting of settings.def;
# `perf --loopback` for every operation, sizes 0 .. 1 MiB, payload checked,
# the spin choice (none on one CPU), the busy-machine line beside a CPU hog,
# --reference;
# one JSON object per size with the documented keys; the table format;
# a standalone server and client; option errors exit 2.
set -u
tool=$1 def=$2
fail=0
err() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"; [ -n "${spid:-}" ] && kill $spid 2>/dev/null; [ -n "${hog:-}" ] && kill $hog 2>/dev/null' EXIT

# ---- info
env -u GPUWIRE_TRANSPORTS GPUWIRE_TCP_STREAMS=3 "$tool" info >"$tmp/info" 2>&1 || err "gpuwire info exited $?"
"$tool" info --all >"$tmp/all" 2>&1 || err "gpuwire info --all exited $?"
"$tool" info --settings >"$tmp/set" 2>&1 || err "gpuwire info --settings exited $?"
for name in $(grep -o '"GPUWIRE_[A-Z0-9_]*"' "$def" | tr -d '"' | sort -u); do
  grep -q "^  $name=" "$tmp/all" || err "gpuwire info --all does not list $name"
  grep -q "^  $name=" "$tmp/set" || err "gpuwire info --settings does not list $name"
done
for f in info all; do
  grep -Eq '^  tcp +usable' "$tmp/$f" || err "gpuwire info ($f): tcp not usable"
  grep -q '^features: ' "$tmp/$f" || err "gpuwire info ($f): no features line"
done
grep -q '^settings: [0-9]* GPUWIRE_\* variables .*; 1 set in the environment:' "$tmp/info" ||
  err "gpuwire info: no settings summary line"
grep -q '^  GPUWIRE_TCP_STREAMS="3"  \[env; default "auto"\]' "$tmp/info" ||
  err "gpuwire info: the summary does not show the setting from the environment"
[ "$(grep -c '^  GPUWIRE_' "$tmp/info")" = 1 ] || err "gpuwire info: the summary lists settings not set"
[ "$(wc -l <"$tmp/info")" -lt 20 ] || err "gpuwire info: the summary has $(wc -l <"$tmp/info") lines"
GPUWIRE_TCP_STREAMS=3 "$tool" info --settings | grep -q 'GPUWIRE_TCP_STREAMS="3"  \[env; default "auto"\]' ||
  err "gpuwire info does not show a value from the environment"
GPUWIRE_TCP_STREMS=3 "$tool" info --settings >"$tmp/typo" 2>&1
grep -q 'did you mean GPUWIRE_TCP_STREAMS' "$tmp/typo" || err "no suggestion for a misspelt setting"
"$tool" info --topo >"$tmp/topo" 2>&1
rc=$?
[ $rc = 0 ] || grep -q 'topology support not built' "$tmp/topo" || err "info --topo exited $rc: $(cat "$tmp/topo")"

# ---- perf, every operation, JSON
for op in put get send put_notify; do
  out="$tmp/perf-$op.json"
  if ! "$tool" perf --loopback --op $op --size 0,1,4095,65537,1M --iters 20 --window 8 --check --json \
       >"$out" 2>"$tmp/perf-$op.err"; then
    err "perf --op $op failed:"; cat "$tmp/perf-$op.err"; continue
  fi
  n=$(wc -l <"$out")
  [ "$n" = 5 ] || err "perf --op $op: $n lines of JSON, expected 5"
  for key in op bytes iterations bw_GBps msg_rate lat_us_avg lat_us_p50 lat_us_p99 \
             cpu_initiator_pct cpu_target_pct post_us; do
    c=$(grep -c "\"$key\":" "$out")
    [ "$c" = 5 ] || err "perf --op $op: key $key in $c of 5 lines"
  done
  grep -q "\"op\":\"$op\"" "$out" || err "perf --op $op: op field"
  for b in 0 1 4095 65537 1048576; do
    grep -q "\"bytes\":$b," "$out" || err "perf --op $op: no line for $b bytes"
  done
  [ "$(grep -c '"checked":true' "$out")" = 5 ] || err "perf --op $op: not every size checked"
  grep -q '"iterations":20,' "$out" || err "perf --op $op: --iters 20 not honoured"
  if command -v python3 >/dev/null; then
    python3 -c 'import json,sys
for l in open(sys.argv[1]): json.loads(l)' "$out" || err "perf --op $op: invalid JSON"
  fi
done
head -2 "$tmp/perf-put.json"

# ---- the table
"$tool" perf --loopback --size 8:64 --duration 0.05 >"$tmp/table" 2>&1 || err "perf table run failed"
grep -q '^#bytes' "$tmp/table" || err "perf: no table header"
grep -q '^# transport [a-z]*: ' "$tmp/table" || err "perf: transport line missing"
[ "$(grep -c '^[0-9]' "$tmp/table")" = 4 ] || err "perf 8:64: expected 4 rows"
cat "$tmp/table"

# ---- the spin choice, the busy-machine line, --reference
"$tool" perf --loopback --size 8,64K --duration 0.3 --reference >"$tmp/ref" 2>&1 || err "perf --reference failed"
grep -q '^# gpuwire perf: .*(auto: [0-9]* CPUs for 2 spinning processes' "$tmp/ref" ||
  err "perf: the header does not say how the spin was chosen: $(head -1 "$tmp/ref")"
grep -Eq '^# reference, this machine: memcpy of 65536 bytes in one thread [0-9.]+ GB/s; gpuwire [0-9.]+ GB/s there is [0-9.]+x' "$tmp/ref" ||
  err "perf --reference: no memcpy line"
grep -Eq '^# reference, this machine: pipe ping-pong between two processes [0-9.]+ us one way; gpuwire p50 [0-9.]+ us at 8 bytes' "$tmp/ref" ||
  err "perf --reference: no pipe line"
if command -v taskset >/dev/null; then # one CPU for both processes: no spinning
  taskset -c 0 "$tool" perf --loopback --size 8 --iters 50 --json >"$tmp/one" 2>&1 || err "perf under taskset failed"
  grep -q '"spin_us":0,' "$tmp/one" || err "perf on one CPU still spins: $(cat "$tmp/one")"
fi
"$tool" perf --loopback --size 8 --iters 50 --spin-us 50 --json | grep -q '"spin_us":50,' || err "--spin-us 50 not honoured"
# --wait: the client's latency-phase waits go through gw_request_wait (its header says so), every
# payload checked, sends and puts
for op in send put; do
  "$tool" perf --loopback --op $op --size 8,4K --iters 50 --lat-only --busy-poll --wait --check >"$tmp/wait" 2>&1 ||
    err "perf --wait --op $op failed: $(tail -3 "$tmp/wait")"
  grep -q '^# the latency phase waits with gw_request_wait()' "$tmp/wait" || err "perf --wait: no header line: $(head -3 "$tmp/wait")"
  [ "$(grep -c '^[0-9]' "$tmp/wait")" = 2 ] || err "perf --wait --op $op: expected 2 rows: $(cat "$tmp/wait")"
done
# a CPU hog beside the run: the line after the table says the machine was busy
sh -c 'while :; do :; done' &
hog=$!
"$tool" perf --loopback --size 4K --duration 0.3 >"$tmp/busy" 2>&1
kill $hog; wait $hog 2>/dev/null
hog=
grep -q '^# busy machine: other processes used [0-9.]* of [0-9]* CPUs' "$tmp/busy" ||
  err "perf beside a CPU hog: no busy-machine line: $(tail -3 "$tmp/busy")"

# ---- a standalone server and a client
"$tool" perf --server --bind 127.0.0.1 --port 0 --once >"$tmp/server" 2>&1 &
spid=$!
i=0
while ! grep -q 'listening on' "$tmp/server" && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/server")
if [ -z "$port" ]; then
  err "server did not report its port: $(cat "$tmp/server")"
else
  "$tool" perf 127.0.0.1:$port --op get --size 4K --iters 10 --json >"$tmp/client" 2>&1 ||
    err "client against the server failed: $(cat "$tmp/client")"
  grep -q '"op":"get","bytes":4096' "$tmp/client" || err "client output: $(cat "$tmp/client")"
  wait $spid || err "server --once exited $?"
fi
spid=

# ---- --hugepages: both sides' host buffers from 2 MiB boundaries, payload checked
if "$tool" perf --loopback --hugepages --op put --size 4K,3M --iters 10 --window 4 --check --json \
     >"$tmp/huge.json" 2>"$tmp/huge.err"; then
  [ "$(grep -c '"hugepages":true' "$tmp/huge.json")" = 2 ] || err "perf --hugepages: not in every JSON line"
  [ "$(grep -c '"checked":true' "$tmp/huge.json")" = 2 ] || err "perf --hugepages: payload not checked"
else
  err "perf --hugepages failed:"; cat "$tmp/huge.err"
fi
grep -q '"hugepages":false' "$tmp/perf-put.json" || err "perf: hugepages not false by default"

# ---- GPUWIRE_TCP_CONGESTION: on a local connection a pacing bbr is swapped
# for cubic/reno (auto), left alone (system), an unknown name warned about
sys_cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)
if [ "$sys_cc" = bbr ]; then
  GPUWIRE_LOG_LEVEL=info GPUWIRE_TRANSPORTS=tcp "$tool" perf --loopback --op put --size 4K --iters 5 --bw-only \
    >/dev/null 2>"$tmp/cc-auto.err" || err "perf with GPUWIRE_TCP_CONGESTION=auto failed"
  grep -Eq "congestion control (cubic|reno) instead of the system's bbr" "$tmp/cc-auto.err" ||
    err "GPUWIRE_TCP_CONGESTION=auto: no switch from bbr logged on loopback"
  GPUWIRE_TCP_CONGESTION=system GPUWIRE_LOG_LEVEL=info GPUWIRE_TRANSPORTS=tcp "$tool" perf --loopback --op put \
    --size 4K --iters 5 --bw-only >/dev/null 2>"$tmp/cc-sys.err" || err "perf with GPUWIRE_TCP_CONGESTION=system failed"
  grep -q "instead of the system's" "$tmp/cc-sys.err" && err "GPUWIRE_TCP_CONGESTION=system still switched"
else
  echo "tool_smoke: the system's congestion control is $sys_cc, not bbr: the auto switch is not exercised here"
fi
GPUWIRE_TCP_CONGESTION=no_such_cc GPUWIRE_TRANSPORTS=tcp "$tool" perf --loopback --op put --size 4K --iters 5 \
  --bw-only --check >/dev/null 2>"$tmp/cc-bad.err" || err "perf with an unknown congestion control failed"
grep -q "GPUWIRE_TCP_CONGESTION=no_such_cc: the kernel refused it" "$tmp/cc-bad.err" ||
  err "GPUWIRE_TCP_CONGESTION=no_such_cc: no warning"

# ---- usage errors
for args in "--op fly --loopback" "--size 1Q --loopback" "--window 0 --loopback" "" "--loopback --server" \
            "--loopback --hugepages --alloc" "--server --hugepages"; do
  "$tool" perf $args >/dev/null 2>&1
  rc=$?
  [ $rc = 2 ] || err "perf $args exited $rc, expected 2"
done
"$tool" perf --loopback --size 1 --iters 1 --duration 0 >/dev/null 2>&1 && err "--duration 0 accepted"
[ $fail = 0 ] && echo "tool_smoke: all checks passed"
exit $fail
