#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verbs_prof.sh [BUILD_DIR] - where a small verbs operation's time goes, in
# the Soft-RoCE guest (tests/rxe/run-in-rxe-vm.sh), gpuwire next to perftest:
# for each OP (put: ib_write_bw, send: ib_send_bw, lat: ib_write_lat) at S
# bytes, both tools run once under `perf stat` (system calls and CPU time
# per operation, both processes of the pair counted) and once under
# `perf record -a` (cpu-clock samples of the whole guest: user code, libibverbs,
# the rxe kernel work), and the top symbols of each are printed.  The guest
# has no PMU: cpu-clock sampling only, no call graphs.
# Knobs: OPS ("put send lat"), S (8), N (20000 operations; lat 3000),
#        TOP (25 symbols), PROF_DIR (a host directory to keep perf.data in),
#        GW_BENCH (another build's gw_verbs_bench), NO_RECORD=1 (perf stat only).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build}" && pwd) || { echo "no build dir" >&2; exit 2; }
if [ -z "${RXE_DEV:-}" ]; then
  [ -x "$B/tests/verbs/gw_verbs_bench" ] || { echo "build first" >&2; exit 2; }
  command -v perf >/dev/null || { echo "verbs_prof: perf not installed (apt-get install linux-perf)" >&2; exit 2; }
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1500} "$HERE/../../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_prof.sh" "$B"
fi
S=${S:-8}
TOP=${TOP:-25}
D=${PROF_DIR:-/tmp}
GW=${GW_BENCH:-$B/tests/verbs/gw_verbs_bench}
echo "# verbs_prof: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), guest $(uname -r), $RXE_DEV, $S bytes"
pt_pair() {  # tool args...: server in the background, the client retried until it connects
  local tool=$1; shift
  "$tool" "$@" > /tmp/pp.srv 2>&1 & local sp=$!
  local try
  for try in 1 2 3 4 5 6; do
    sleep 0.5
    "$tool" "$@" 127.0.0.1 > /tmp/pp.cli 2>&1 && break
    kill -0 $sp 2>/dev/null || break
  done
  wait $sp
}
export -f pt_pair
for op in ${OPS:-put send lat}; do
  case $op in put) tool=ib_write_bw ;; send) tool=ib_send_bw ;; lat) tool=ib_write_lat ;; esac
  n=${N:-20000}; [ "$op" = lat ] && n=${N:-3000}
  for who in gpuwire perftest; do
    if [ $who = gpuwire ]; then
      cmd=(timeout 120 "$GW" "$op" "$S" "$n" "$RXE_DEV" "$RXE_DEV")
    else
      cmd=(timeout 120 bash -c "pt_pair $tool -d $RXE_DEV -x $RXE_GID_INDEX -s $S -n $n -F")
    fi
    echo "== $op $S x $n: $who: perf stat (both processes)"
    GW_BENCH_DESCRIBE=1 perf stat -x, -e raw_syscalls:sys_enter,task-clock,context-switches -o /tmp/pstat \
      "${cmd[@]}" 2>&1 | grep -v '^$' | tail -n 3
    awk -F, -v n="$n" '/sys_enter|task-clock|context-switches/ {
        printf "   %-28s %14s  per op %.2f\n", $3, $1, $1 / n }' /tmp/pstat
    [ -n "${NO_RECORD:-}" ] && continue
    echo "== $op $S x $n: $who: perf record -a, top $TOP (overhead, command, object, symbol)"
    perf record -q -a -e cpu-clock -F 4000 -o "$D/perf.$op.$who.data" "${cmd[@]}" > /dev/null 2>&1
    perf report -q -i "$D/perf.$op.$who.data" --sort comm,dso,sym --percent-limit 0.7 2>/dev/null |
      grep -v '^$' | head -n "$TOP"
  done
done
