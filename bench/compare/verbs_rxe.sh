#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verbs_rxe.sh [BUILD_DIR] - gpuwire over verbs next to perftest, in one
# Soft-RoCE guest run on the same rxe device (loopback on rxe0):
#   put vs ib_write_bw, get vs ib_read_bw, send vs ib_send_bw (8 B .. 4 MiB),
#   8-byte put ping-pong latency vs ib_write_lat;
#   then GPU memory on the staging rung (the fake CUDA driver, both sides'
#   buffers "device memory") vs host memory, put and get, with `gpuwire perf`:
#   the cost of the staged pipeline relative to the host path (STAGED_SIZES).
# Prints a table with the ratios (gpuwire / perftest).  Under emulation the
# absolute figures mean little (ib_write_bw ~0.3-0.5 Gb/s); the ratios count.
# Each figure is the best of REPS runs (default 3), gpuwire and perftest
# alternating, because the emulated guest is noisy (2 vCPUs shared by two
# busy-polling processes and the kernel's rxe work).
# Knobs: SIZES="8 4096 ..." BYTES=total bytes per bandwidth run (default 32M)
#        REPS (default 3) LAT_ITERS (default 2000); GW_BENCH_DEV (default rxe0).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build}" && pwd) || { echo "no build dir" >&2; exit 2; }
if [ -z "${RXE_DEV:-}" ]; then   # on the host: boot the guest and run this script inside
  [ -x "$B/tests/verbs/gw_verbs_bench" ] || { echo "build first: $B/tests/verbs/gw_verbs_bench missing" >&2; exit 2; }
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1200} "$HERE/../../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_rxe.sh" "$B"
fi
SIZES=${SIZES:-"8 512 4096 65536 262144 1048576 4194304"}
BYTES=${BYTES:-$((32 << 20))}
LAT_ITERS=${LAT_ITERS:-2000}
REPS=${REPS:-3}
DEV=${GW_BENCH_DEV:-$RXE_DEV}
GID=$RXE_GID_INDEX
GW=$B/tests/verbs/gw_verbs_bench
iters_for() { local n=$((BYTES / $1)); [ $n -lt 8 ] && n=8; [ $n -gt 2000 ] && n=2000; echo $n; }
perf_pair() {  # tool args... : server in the background, client retried while it is not up yet
  local tool=$1; shift
  timeout 60 $tool "$@" > /tmp/pt.srv 2>&1 & local sp=$!
  local try
  for try in 1 2 3 4 5; do
    sleep 0.5
    timeout 60 $tool "$@" 127.0.0.1 > /tmp/pt.cli 2>&1 && break
    kill -0 $sp 2>/dev/null || break
  done
  wait $sp
}
perf_bw() {  # tool size iters -> average Gb/s
  local tool=$1 s=$2 n=$3
  perf_pair "$tool" -d "$DEV" -x "$GID" -s "$s" -n "$n" -F --report_gbits
  # the larger of the two sides' reports (ib_send_bw's client prints 0 at tiny sizes)
  cat /tmp/pt.cli /tmp/pt.srv | awk '/BW average/{getline; if ($4 + 0 > m + 0) m = $4} END{print m}'

}
gw_bw() {  # op size iters -> Gb/s
  timeout 60 "$GW" "$1" "$2" "$3" "$DEV" "$DEV" 2>/tmp/gw.err | sed -n 's/.*bw_gbps=//p'
}
max() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{ print (a + 0 >= b + 0) ? a : b }'; }
min() { if [ -z "$1" ]; then echo "$2"; elif [ -z "$2" ]; then echo "$1"; else awk -v a="$1" -v b="$2" 'BEGIN{ print (a + 0 <= b + 0) ? a : b }'; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }
echo "# gpuwire verbs vs perftest, $(uname -r), device $DEV (rxe, loopback), $(nproc) vCPU guest"
printf "%-6s %9s %7s %12s %12s %7s\n" op bytes iters "gpuwire" "perftest" ratio
for s in $SIZES; do
  n=$(iters_for "$s")
  for pair in "put:ib_write_bw" "get:ib_read_bw" "send:ib_send_bw"; do
    op=${pair%%:*}; tool=${pair#*:}
    g=""; p=""
    for r in $(seq "$REPS"); do
      g=$(max "$g" "$(gw_bw "$op" "$s" "$n")"); p=$(max "$p" "$(perf_bw "$tool" "$s" "$n")")
    done
    [ "$g" = 0 ] && g=""; [ "$p" = 0 ] && p=""
    printf "%-6s %9s %7s %9s Gb/s %9s Gb/s %7s\n" "$op" "$s" "$n" "${g:-fail}" "${p:-fail}" "$(ratio "$g" "$p")"
    [ -z "$g" ] && tail -n 5 /tmp/gw.err
  done
done
# latency: 8-byte put ping-pong (each side polls its memory and calls
# gw_progress() on every check) vs ib_write_lat.  Compared on the median
# (perftest's t_typical): the averages swing with the host's load (a busy host
# preempts the guest's vCPUs and a few 10 ms stalls dominate the mean); the
# averages are printed too.
g=""; p=""; ga=""; pa=""
for r in $(seq "$REPS"); do
  out=$(timeout 120 "$GW" lat 8 "$LAT_ITERS" "$DEV" "$DEV" 2>/tmp/gw.err)
  g=$(min "$g" "$(echo "$out" | sed -n 's/.*typical_usec=//p')")
  ga=$(min "$ga" "$(echo "$out" | sed -n 's/.* usec=\([0-9.]*\).*/\1/p')")
  perf_pair ib_write_lat -d "$DEV" -x "$GID" -s 8 -n "$LAT_ITERS" -F
  p=$(min "$p" "$(awk '/t_avg/{getline; print $5; exit}' /tmp/pt.cli)")
  pa=$(min "$pa" "$(awk '/t_avg/{getline; print $6; exit}' /tmp/pt.cli)")
done
printf "%-6s %9s %7s %9s us   %9s us   %7s   (median; averages %s us vs %s us)\n" lat 8 "$LAT_ITERS" \
  "${g:-fail}" "${p:-fail}" "$(ratio "$g" "$p")" "${ga:-?}" "${pa:-?}"
# staged GPU memory (fake CUDA driver) vs host memory: gpuwire perf, both
# sides' buffers of the kind, best of REPS; the ratio is staged / host.  The
# fake driver's copies are memcpys: this measures the pipeline's overhead on
# the wire side (extra round trips, owner serving), not a GPU's copy engines.
FAKE=$B/tests/fakecuda/libgwfakecuda.so
if [ -f "$FAKE" ]; then
  gw_perf() {  # mem op size -> GB/s
    GPUWIRE_TRANSPORTS=verbs GPUWIRE_IB_DEVICE=$DEV GPUWIRE_CUDA_LIB=$FAKE timeout 120 "$B/gpuwire" perf \
      --loopback --mem "$1" --op "$2" --size "$3" --duration 1 --bw-only --json 2>/dev/null |
      sed -n 's/.*"bw_GBps":\([0-9.]*\).*/\1/p' | head -1
  }
  printf "%-6s %9s %14s %14s %7s\n" op bytes "staged GPU" "host" ratio
  for s in ${STAGED_SIZES:-65536 1048576 4194304}; do
    for op in put get; do
      g=""; h=""
      for r in $(seq "$REPS"); do
        g=$(max "$g" "$(gw_perf cuda "$op" "$s")"); h=$(max "$h" "$(gw_perf host "$op" "$s")")
      done
      printf "%-6s %9s %9s GB/s %9s GB/s %7s\n" "$op" "$s" "${g:-fail}" "${h:-fail}" "$(ratio "$g" "$h")"
    done
  done
fi
