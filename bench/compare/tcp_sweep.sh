#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tcp_sweep.sh - gpuwire put over tcp loopback against qperf's tcp_bw and
# tcp_lat at the same message sizes, in one run on this machine; prints a
# table with the ratios and writes CSV rows in docs/results/perf.csv's
# format (area tcp-host) for scripts/plot-perf.py.
#
# usage: bench/compare/tcp_sweep.sh [BUILD_DIR] [CSV_OUT]   (defaults: build, tcp_sweep.csv)
# env:   SIZES="8 64 512 4K 32K 256K 1M 4M 16M 64M", DURATION=2 (seconds per
#        phase), SPIN_US (gpuwire perf --spin-us; default: its own choice)
# Needs qperf (scripts/install-deps.sh bench installs it).
set -u
bld=${1:-build}
csv=${2:-tcp_sweep.csv}
tool=$bld/gpuwire
dur=${DURATION:-2}
sizes=${SIZES:-"8 64 512 4K 32K 256K 1M 4M 16M 64M"}
qport=${QPERF_PORT:-19767}
[ -x "$tool" ] || { echo "tcp_sweep: $tool not built (make build)" >&2; exit 1; }
command -v qperf >/dev/null || { echo "tcp_sweep: qperf not installed" >&2; exit 1; }
bytes() { case $1 in *K) echo $(( ${1%K} * 1024 )) ;; *M) echo $(( ${1%M} * 1048576 )) ;; *) echo "$1" ;; esac; }
machine="$(nproc) CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
day=$(date -u +%Y-%m-%d)
echo "# gpuwire put over tcp loopback against qperf tcp_bw / tcp_lat"
echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); machine: $machine; load $(cut -d' ' -f1-3 /proc/loadavg)"
qperf -lp "$qport" >/dev/null 2>&1 &
qpid=$!
trap 'kill $qpid 2>/dev/null' EXIT INT TERM
sleep 0.5
spin=${SPIN_US:+--spin-us $SPIN_US}
printf '%10s %12s %12s %7s %12s %12s %7s\n' bytes gw_GB/s qperf_GB/s ratio gw_lat_us qperf_lat_us ratio
: >"$csv"
for s in $sizes; do
  n=$(bytes "$s")
  j=$(GPUWIRE_TRANSPORTS=tcp "$tool" perf --loopback -s "$n" -d "$dur" -j $spin 2>/dev/null | tail -1)
  gbw=$(echo "$j" | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p')
  glat=$(echo "$j" | sed -n 's/.*"lat_us_p50":\([0-9.e+-]*\).*/\1/p')
  q=$(qperf -lp "$qport" -t "$dur" -m "$n" -uu localhost tcp_bw tcp_lat 2>/dev/null)
  # -uu: qperf prints bytes/sec and ns
  qbw=$(echo "$q" | awk '$1 == "bw" {printf "%.6f", $3 / 1e9; exit}')
  qlat=$(echo "$q" | awk '$1 == "latency" {printf "%.3f", $3 / 1000; exit}')
  rb=$(awk -v a="$gbw" -v b="$qbw" 'BEGIN{ if (a==""||b==""||b+0==0) print "-"; else printf "%.2f", a/b }')
  rl=$(awk -v a="$glat" -v b="$qlat" 'BEGIN{ if (a==""||b==""||b+0==0) print "-"; else printf "%.2f", a/b }')
  printf '%10s %12s %12s %7s %12s %12s %7s\n' "$n" "${gbw:--}" "${qbw:--}" "$rb" "${glat:--}" "${qlat:--}" "$rl"
  echo "tcp-host,tcp put (host memory),put,$n,bw,GB/s,$gbw,qperf tcp_bw,$qbw,\"$machine\",$day,SOURCE" >>"$csv"
  echo "tcp-host,tcp put (host memory),put,$n,lat,us,$glat,qperf tcp_lat,$qlat,\"$machine\",$day,SOURCE" >>"$csv"
done
echo "# gpuwire: bandwidth phase with perf's default window; latency: p50 one way (round trip / 2)"
echo "# qperf: tcp_bw one stream of -m byte writes; tcp_lat one way (round trip / 2)"
