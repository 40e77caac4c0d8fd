#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verbs_batch_prof.sh [BUILD_DIR [BUILD_DIR_B ...]] - where a batched verbs put's
# time goes in the Soft-RoCE guest (tests/rxe/run-in-rxe-vm.sh, rxe0
# loopback): for each SHAPE, the batched put (`gpuwire perf --loopback
# --window 1 --batch N --size S`) and one contiguous put of the same bytes,
# each run N_OPS operations under `strace -f -c` (system calls of both
# processes: ibv_post_send on rxe is one write() per call, a sleep on the
# completion channel a poll() and a read()), and, with PERF=1, under
# `perf record -a` (cpu-clock samples of the whole guest; the guest has no
# PMU), the top symbols printed.  More build dirs (B, C, ...) run the same
# rows alternating with the first (A/B in one boot).
# Knobs: SHAPES ("256:1K 4096:16K"), N_OPS (per shape; default 40 for small
#        shapes, 4 for 64 MiB ones), REPS (A/B rounds, default 2), PERF (0),
#        STRACE (0), TOP (20), BUSY (0; 1: also a --busy-poll batch row),
#        SPIN (1: also a batch row spinning 20 ms before it sleeps).
# Each row also prints the rxe hw_counters that moved during it.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILDS=()
for d in "${@:-$HERE/../../build}"; do BUILDS+=("$(cd "$d" && pwd)") || { echo "no build dir $d" >&2; exit 2; }; done
A=${BUILDS[0]}
if [ -z "${RXE_DEV:-}" ]; then
  [ -x "$A/gpuwire" ] || { echo "build first: $A/gpuwire missing" >&2; exit 2; }
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1500} "$HERE/../../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_batch_prof.sh" "${BUILDS[@]}"
fi
LABELS=(A B C D E F)
export GPUWIRE_IB_DEVICE=$RXE_DEV GPUWIRE_IB_TIMEOUT=${GPUWIRE_IB_TIMEOUT:-16} GPUWIRE_IB_GID_INDEX=$RXE_GID_INDEX GPUWIRE_TRANSPORTS=verbs
echo "# verbs_batch_prof: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), guest $(uname -r), $RXE_DEV, $(nproc) vCPUs; builds: $(for i in "${!BUILDS[@]}"; do printf '%s=%s ' "${LABELS[$i]}" "${BUILDS[$i]}"; done)"
echo "# GPUWIRE_IB_TIMEOUT=$GPUWIRE_IB_TIMEOUT GPUWIRE_IB_QPS=${GPUWIRE_IB_QPS:-default}"
one() { # label build args... -> one line: label, GB/s, ops, elapsed; strace summary lines after it
  local label=$1 b=$2; shift 2
  local pre=()
  [ "${STRACE:-0}" = 1 ] && pre=(strace -f -c -o /tmp/st.txt)
  local out hw=/sys/class/infiniband/$RXE_DEV/ports/1/hw_counters
  grep -H . $hw/* 2>/dev/null | sed 's|.*/||' > /tmp/hw0.txt
  out=$("${pre[@]}" "$b/gpuwire" perf --loopback --bw-only --json --window 1 "$@" 2>/tmp/err.txt | tail -1)
  printf '%-28s %s\n' "$label" "$(echo "$out" | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*"iterations":\([0-9]*\).*/GB\/s \1 ops \2/p;s/.*"iterations":\([0-9]*\).*"bw_GBps":\([0-9.e+-]*\).*/GB\/s \2 ops \1/p' | head -1)"
  [ -z "$out" ] && sed 's/^/   err: /' /tmp/err.txt | head -5
  grep -H . $hw/* 2>/dev/null | sed 's|.*/||' > /tmp/hw1.txt
  # the rxe counters that moved during the run (packets, retries, errors)
  join -t: /tmp/hw0.txt /tmp/hw1.txt | awk -F: '$3 != $2 {printf " %s+%d", $1, $3 - $2} END {print ""}' | sed 's/^/   rxe:/'
  if [ "${STRACE:-0}" = 1 ]; then
    awk '$NF ~ /^(write|read|poll|ppoll|epoll_wait|epoll_pwait|ioctl|futex|sched_yield|total)$/ && $4 ~ /^[0-9]+$/ {
        printf "   %-12s calls %8d errors %s\n", $NF, $4, ($5 ~ /^[0-9]+$/ ? $5 : 0) } $1 == "------" {next}
        / total$/ {printf "   total calls %s\n", $(NF-1)}' /tmp/st.txt
  fi
}
rec() { # label build args...: perf record -a, top symbols
  local label=$1 b=$2; shift 2
  echo "== perf record -a: $label"
  perf record -q -a -e cpu-clock -F 2000 -o /tmp/perf.data "$b/gpuwire" perf --loopback --bw-only --json --window 1 "$@" > /dev/null 2>&1
  perf report -q -i /tmp/perf.data --sort comm,dso,sym --percent-limit 1 2>/dev/null | grep -v '^$' | head -n "${TOP:-20}"
}
for shape in ${SHAPES:-256:1K 4096:16K}; do
  n=${shape%%:*} s=${shape#*:}
  case $s in *K) sb=$(( ${s%K} * 1024 ));; *M) sb=$(( ${s%M} * 1048576 ));; *) sb=$s;; esac
  tot=$((n * sb))
  ops=${N_OPS:-40}
  [ "$tot" -ge 16777216 ] && ops=${N_OPS:-4}
  for r in $(seq 1 "${REPS:-2}"); do
    for i in "${!BUILDS[@]}"; do
      side=${LABELS[$i]} b=${BUILDS[$i]}
      one "$side ${n}x$s batch" "$b" --batch "$n" --size "$s" -n "$ops"
      one "$side ${n}x$s contig" "$b" --size "$tot" -n "$ops"
      [ "${BUSY:-0}" = 1 ] && one "$side ${n}x$s batch busy" "$b" --batch "$n" --size "$s" -n "$ops" --busy-poll
      [ "${SPIN:-1}" = 1 ] && one "$side ${n}x$s batch spin20ms" "$b" --batch "$n" --size "$s" -n "$ops" --spin-us 20000
    done
  done
  if [ "${PERF:-0}" = 1 ]; then
    for i in "${!BUILDS[@]}"; do
      side=${LABELS[$i]} b=${BUILDS[$i]}
      rec "$side ${n}x$s batch" "$b" --batch "$n" --size "$s" -n "$ops"
      rec "$side ${n}x$s contig" "$b" --size "$tot" -n "$ops"
    done
  fi
done
