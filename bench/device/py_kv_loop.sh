#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# py_kv_loop.sh - the KV example (python/examples/kv_cache_transfer.py) run
# RUNS times, PAR at a time, each under a time limit, to catch the stall seen
# once over intra on one H100 (put per page + put_notify, decode blocked in
# wait_notify).  A run past its limit is not just killed: first `ps` shows
# the wait channel of each of its processes, then SIGABRT makes each Python
# process print its stack (PYTHONFAULTHANDLER), so the log says where it
# stood.  Prints one line per run and a summary; exit 1 if any run failed
# or stalled.
#
# usage: bench/device/py_kv_loop.sh BUILD_DIR [LOG_DIR]
# env:   RUNS=20 PAR=4 MODE=notify|paged LIMIT=60 (s per run)
#        KV_ARGS="--device cuda --requests 4 --layers 8" PYTHON=python3
#        GPUWIRE_LOG_LEVEL etc. pass through to the example
set -u
bld=$(cd "${1:?usage: py_kv_loop.sh BUILD_DIR [LOG_DIR]}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
logs=${2:-$(mktemp -d)}
mkdir -p "$logs"
runs=${RUNS:-20}
par=${PAR:-4}
mode=${MODE:-notify}
lim=${LIMIT:-60}
py=${PYTHON:-$(command -v python3)}
kv_args=${KV_ARGS:---device cuda --requests 4 --layers 8}
echo "== $(date -u), $(uname -n), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg):" \
     "$runs runs of --mode $mode $kv_args, $par at a time, limit $lim s each"

one() { # index
  local i=$1 log="$logs/kv-$mode-$1.log" s e pid sid st=ok
  s=$(date +%s%N)
  # (the example takes a free store port: runs in parallel do not meet)
  : >"$log"   # appended to by every writer, so the stall report is not overwritten
  PYTHONFAULTHANDLER=1 LD_LIBRARY_PATH="$bld" setsid "$py" "$root/python/examples/kv_cache_transfer.py" \
    $kv_args --mode "$mode" >>"$log" 2>&1 &
  pid=$!
  for _ in $(seq $((lim * 10))); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  if kill -0 $pid 2>/dev/null; then
    st=STALL
    sid=$(ps -o sid= -p $pid | tr -d ' ')
    { echo "STALL: run $i past $lim s; processes and wait channels:"
      ps -o pid,stat,etime,wchan:24,cmd -s "$sid"
      echo "--- stacks (SIGABRT -> faulthandler):"; } >>"$log" 2>&1
    for p in $(ps -o pid= -s "$sid"); do kill -ABRT "$p" 2>/dev/null; done
    sleep 2
    kill -KILL -- -"$pid" 2>/dev/null
  fi
  wait $pid 2>/dev/null
  local rc=$?
  e=$(date +%s%N)
  [ $st = ok ] && [ $rc -ne 0 ] && st="FAILED rc $rc"
  [ $st = ok ] && ! grep -q "kv_cache_transfer: OK" "$log" && st="FAILED (no OK line)"
  printf "run %2d %-6s %6d ms %s: %s\n" "$i" "$mode" $(( (e - s) / 1000000 )) "$st" \
    "$(grep -E "arrived|prefill:|Error|STALL" "$log" | head -2 | tr '\n' ' ' | cut -c1-200)"
}

i=0
while [ $i -lt "$runs" ]; do
  for _ in $(seq "$par"); do
    [ $i -lt "$runs" ] || break
    i=$((i + 1))
    one $i &
  done
  wait
done | tee "$logs/kv-$mode-runs.txt"
ok=$(grep -c " ok: " "$logs/kv-$mode-runs.txt")
echo "== $mode: $ok of $runs runs intact; stalls: $(grep -c STALL "$logs/kv-$mode-runs.txt"), failures: $(grep -c FAILED "$logs/kv-$mode-runs.txt")"
[ "$ok" -eq "$runs" ]
