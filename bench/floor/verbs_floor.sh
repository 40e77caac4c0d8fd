#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verbs_floor.sh [BUILD_DIR] - the verbs batch rows against Soft-RoCE's
# own rate, in one guest boot (tests/rxe/run-in-rxe-vm.sh, rxe0 loopback).
# The remote entries of `gpuwire perf --batch N --size S` are not adjacent,
# so each needs an RDMA WRITE of its own (S bytes); the contiguous put of
# the same bytes needs a few large ones.  ib_write_bw gives what rxe moves
# in messages of S bytes and in messages of the contiguous put's size (1 MiB
# for the 64 MiB shape: rxe's per-message cost is nothing there), each with
# perftest's 128 messages in flight, so its ratio is an upper bound for any
# library that moves the batch as RDMA WRITEs, however it posts them.
# Per round, back to back: gpuwire's batch and contiguous put (perf
# --loopback --window 1), then ib_write_bw at both sizes; the table gives
# the medians over ROUNDS of the rates and the ratios, and "of floor"
# (gpuwire's ratio / perftest's).
# Unattended: bench/floor/verbs_floor.sh build    Knobs: ROUNDS (3), SHAPES
# ("256x1K 4096x16K"), DUR (1 s; 64 MiB shapes BIG_DUR, 12 s).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build}" && pwd) || { echo "no build dir" >&2; exit 2; }
if [ -z "${RXE_DEV:-}" ]; then   # on the host: boot the guest and run this script inside
  [ -x "$B/gpuwire" ] || { echo "build first: $B/gpuwire missing" >&2; exit 2; }
  command -v ib_write_bw > /dev/null || { echo "verbs_floor.sh: no ib_write_bw (apt-get install perftest)" >&2; exit 2; }
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1500} "$HERE/../../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_floor.sh" "$B"
fi
export GPUWIRE_IB_DEVICE=$RXE_DEV GPUWIRE_IB_TIMEOUT=16 GPUWIRE_IB_GID_INDEX=$RXE_GID_INDEX
rounds=${ROUNDS:-3}
PORT=18620
gw() { # seconds args... -> GB/s
  local d=$1
  shift
  GPUWIRE_TRANSPORTS=verbs timeout 300 "$B/gpuwire" perf --loopback --bw-only --json --window 1 --duration "$d" "$@" 2>/dev/null |
    tail -1 | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p'
}
pt() { # size iterations -> GB/s (ib_write_bw's BW average, either side's report)
  PORT=$((PORT + 1))
  local args="-d $RXE_DEV -x $RXE_GID_INDEX -s $1 -n $2 -F -p $PORT --report_gbits" try
  timeout 120 ib_write_bw $args > /tmp/vf.srv 2>&1 & local sp=$!
  for try in 1 2 3 4 5 6 7 8; do
    sleep 0.5
    timeout 120 ib_write_bw $args 127.0.0.1 > /tmp/vf.cli 2>&1 && break
    kill -0 $sp 2>/dev/null || break
  done
  wait $sp
  cat /tmp/vf.cli /tmp/vf.srv | awk -v s="$1" '$1 == s && NF >= 5 && $4 + 0 > m + 0 {m = $4} END {if (m + 0 > 0) printf "%.6f\n", m / 8}'
}
med() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "# verbs batches against rxe's floor, $(date -u '+%Y-%m-%d %H:%M UTC'), guest $(uname -r), $RXE_DEV loopback, $(nproc) vCPUs; $rounds rounds"
printf '%-9s %9s %9s %9s %9s %9s %9s %8s\n' shape gw_batch gw_contig gw_ratio pt_entry pt_contig pt_ratio of_floor
for shape in ${SHAPES:-256x1K 4096x16K}; do
  n=${shape%x*} s=${shape#*x}
  case $s in *K) b=$(( ${s%K} * 1024 )) ;; *M) b=$(( ${s%M} * 1048576 )) ;; *) b=$s ;; esac
  tot=$((n * b))
  d=${DUR:-1}
  [ "$tot" -ge 16777216 ] && d=${BIG_DUR:-12}
  big=$tot
  [ "$big" -gt 1048576 ] && big=1048576
  # perftest iterations: about 20 MiB per run at the entry size, 64 MiB at the large one
  ne=$(( 20971520 / b )); [ $ne -lt 200 ] && ne=200
  nb=$(( 67108864 / big )); [ $nb -lt 50 ] && nb=50
  : > /tmp/vf.rows
  for r in $(seq "$rounds"); do
    echo "$(gw "$d" --batch "$n" --size "$s") $(gw "$d" --size "$tot") $(pt "$b" "$ne") $(pt "$big" "$nb")" >> /tmp/vf.rows
  done
  sed "s/^/# $shape round: /" /tmp/vf.rows
  awk 'NF == 4 && $2 > 0 && $4 > 0 {g = $1 / $2; p = $3 / $4; printf "%.4f %.4f %.4f\n", g, p, g / p}' /tmp/vf.rows > /tmp/vf.q
  printf '%-9s %9s %9s %9s %9s %9s %9s %8s\n' "$shape" "$(awk '{print $1}' /tmp/vf.rows | med)" \
    "$(awk '{print $2}' /tmp/vf.rows | med)" "$(awk '{print $1}' /tmp/vf.q | med)" "$(awk '{print $3}' /tmp/vf.rows | med)" \
    "$(awk '{print $4}' /tmp/vf.rows | med)" "$(awk '{print $2}' /tmp/vf.q | med)" "$(awk '{print $3}' /tmp/vf.q | med)"
done
echo "# goals: gw_ratio >= 0.8 at 256x1K, >= 0.95 at 4096x16K"
