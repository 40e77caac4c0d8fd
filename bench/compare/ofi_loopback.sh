#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ofi_loopback.sh - gpuwire over the ofi transport (libfabric) on loopback,
# per provider, against libfabric's own tools with the same provider and
# against gpuwire's tcp transport, alternating in one run on this machine:
#   put 4 MiB bandwidth    gpuwire ofi put, window W    vs fabtests fi_rma_bw -o write -W W
#                          (FI_DELIVERY_COMPLETE, -U, as gpuwire's puts; and without -U)
#   send 8 B latency       gpuwire ofi send ping-pong   vs fi_pingpong -S 8 (one way, usec/xfer)
#                          (--busy-poll: fi_pingpong spins on its queue; gpuwire's default;
#                          and --busy-poll --wait: the client waits in gw_request_wait)
# Ratios: bandwidth gpuwire / tool (target >= 0.95), latency gpuwire / tool
# (target <= 1.05).  The tools print MB/sec as 10^6 bytes per second and
# usec/xfer as one transfer's time (fi_pingpong: half a round trip), the
# units of gpuwire perf's GB/s and lat_avg.
#
# usage: bench/compare/ofi_loopback.sh [BUILD_DIR]        (default: build)
# env:   PROVIDERS="tcp shm", DURATION=2 (seconds per gpuwire phase),
#        REPEAT=3 (the median is reported), WINDOW=32, PP_ITERS=20000
#        (fi_pingpong 8 B round trips), BW_ITERS=500 (fi_rma_bw 4 MiB writes),
#        PORT=12360, FI_RMA_BW=fi_rma_bw (fabtests is not packaged in Debian 12:
#        build it from libfabric's source at the installed version and name the
#        binary here).  A tool that is absent leaves its columns "-".
#        RT=1: every program (gpuwire and the tools alike) runs under
#        `chrt -f 10` (SCHED_FIFO, needs root): on a machine whose CPUs other
#        work keeps busy, spinning programs are otherwise descheduled for
#        whole time slices and a latency figure measures the load.  Each run
#        then holds the CPUs it spins on for its few seconds.
set -u
bld=${1:-build}
tool=$bld/gpuwire
dur=${DURATION:-2}
rep=${REPEAT:-3}
win=${WINDOW:-32}
ppit=${PP_ITERS:-20000}
bwit=${BW_ITERS:-500}
port=${PORT:-12360}
rmabw=${FI_RMA_BW:-fi_rma_bw}
rt=
[ "${RT:-0}" = 1 ] && rt="chrt -f 10"
[ -x "$tool" ] || { echo "ofi_loopback: $tool not built (make build)" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print ""}'; }
jget() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
have_pp=0 have_bw=0
command -v fi_pingpong >/dev/null && have_pp=1
command -v "$rmabw" >/dev/null && have_bw=1

echo "# gpuwire ofi loopback benchmark: gpuwire over libfabric against libfabric's tools"
echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# machine: $(uname -srm), $(nproc) CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
echo "# load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "# libfabric: $(fi_info --version 2>/dev/null | tr '\n' ' ')"
echo "# gpuwire: $("$tool" --version); fi_pingpong: $([ $have_pp = 1 ] && command -v fi_pingpong || echo absent);" \
     "fi_rma_bw: $([ $have_bw = 1 ] && command -v "$rmabw" || echo absent)"
echo "# each figure: median of $rep runs; window $win; fi_pingpong $ppit round trips, fi_rma_bw $bwit writes"
echo "# scheduling: ${rt:-normal (RT=1: chrt -f 10)}"

gw() { # out-name, transports, provider, perf args...
  out=$1 tls=$2 prov=$3
  shift 3
  GPUWIRE_TRANSPORTS=$tls GPUWIRE_OFI_PROVIDER=$prov timeout 120 $rt "$tool" perf --loopback --duration "$dur" --json "$@" \
    >>"$tmp/$out" 2>>"$tmp/err" || echo "gpuwire perf ($tls $prov $*) failed: $(tail -1 "$tmp/err")" >&2
}
# Server and client of one libfabric tool on a port of their own (a server
# left by a failed run holds its port until its timeout); the client's row
# into file OUT.  The server is waited for, so no tool outlives its pair.
pair() { # out, program, args... -> "MB/sec usec/xfer" lines into out
  out=$1
  shift
  port=$((port + 1))
  timeout 120 $rt "$@" -s 127.0.0.1 -B "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  timeout 120 $rt "$@" -P "$port" 127.0.0.1 2>>"$tmp/err" | awk '$1 ~ /^[0-9]/ {print $5, $6}' >>"$out"
  wait "$srv"
}
pp() { # out, provider -> usec/xfer of 8 B into out
  port=$((port + 1))
  timeout 120 $rt fi_pingpong -p "$2" -e rdm -S 8 -I "$ppit" -B "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  timeout 120 $rt fi_pingpong -p "$2" -e rdm -S 8 -I "$ppit" -P "$port" 127.0.0.1 2>>"$tmp/err" |
    awk '$1 ~ /^[0-9]/ {print $7}' >>"$1"
  wait "$srv"
}
for i in $(seq "$rep"); do
  gw tcp_bw tcp "" --op put --size 4M --window "$win" --bw-only
  gw tcp_lat tcp "" --op send --size 8 --lat-only --busy-poll
  for p in ${PROVIDERS:-tcp shm}; do
    gw "ofi_${p}_bw" ofi "$p" --op put --size 4M --window "$win" --bw-only
    if [ $have_bw = 1 ]; then
      pair "$tmp/rbdc" "$rmabw" -p "$p" -e rdm -o write -U -W "$win" -S 4194304 -I "$bwit"
      pair "$tmp/rbtc" "$rmabw" -p "$p" -e rdm -o write -W "$win" -S 4194304 -I "$bwit"
      for k in dc tc; do # MB/sec (10^6 bytes) -> GB/s
        [ -s "$tmp/rb$k" ] && awk '{printf "%.4f\n", $1 / 1000}' "$tmp/rb$k" >>"$tmp/rb_${p}_$k"
        rm -f "$tmp/rb$k"
      done
    fi
    gw "ofi_${p}_latb" ofi "$p" --op send --size 8 --lat-only --busy-poll
    gw "ofi_${p}_lat" ofi "$p" --op send --size 8 --lat-only
    gw "ofi_${p}_latw" ofi "$p" --op send --size 8 --lat-only --busy-poll --wait
    [ $have_pp = 1 ] && pp "$tmp/pp_${p}_lat" "$p"
  done
done
tbw=$(jget bw_GBps <"$tmp/tcp_bw" | median)
tlat=$(jget lat_us_avg <"$tmp/tcp_lat" | median)
row() { printf '%-5s %-38s %9s  %-42s %9s %7s\n' "$@"; }
row provider measurement gpuwire reference "ref" ratio
for p in ${PROVIDERS:-tcp shm}; do
  obw=$(jget bw_GBps <"$tmp/ofi_${p}_bw" 2>/dev/null | median)
  olatb=$(jget lat_us_avg <"$tmp/ofi_${p}_latb" 2>/dev/null | median)
  olat=$(jget lat_us_avg <"$tmp/ofi_${p}_lat" 2>/dev/null | median)
  olatw=$(jget lat_us_avg <"$tmp/ofi_${p}_latw" 2>/dev/null | median)
  rbdc=$([ -s "$tmp/rb_${p}_dc" ] && median <"$tmp/rb_${p}_dc")
  rbtc=$([ -s "$tmp/rb_${p}_tc" ] && median <"$tmp/rb_${p}_tc")
  plat=$([ -s "$tmp/pp_${p}_lat" ] && median <"$tmp/pp_${p}_lat")
  row "$p" "put 4 MiB [GB/s]" "$obw" "fi_rma_bw -o write -U (delivery complete)" "${rbdc:--}" "$(ratio "$obw" "$rbdc")"
  row "$p" "put 4 MiB [GB/s]" "$obw" "fi_rma_bw -o write (transmit complete)" "${rbtc:--}" "$(ratio "$obw" "$rbtc")"
  row "$p" "put 4 MiB [GB/s]" "$obw" "gpuwire tcp transport" "$tbw" "$(ratio "$obw" "$tbw")"
  row "$p" "send 8 B latency, busy-poll [us]" "$olatb" "fi_pingpong -S 8 (spins)" "${plat:--}" "$(ratio "$olatb" "$plat")"
  row "$p" "send 8 B latency, default [us]" "$olat" "fi_pingpong -S 8 (spins)" "${plat:--}" "$(ratio "$olat" "$plat")"
  row "$p" "send 8 B latency, request_wait [us]" "${olatw:--}" "fi_pingpong -S 8 (spins)" "${plat:--}" "$(ratio "$olatw" "$plat")"
  row "$p" "send 8 B latency, busy-poll [us]" "$olatb" "gpuwire tcp transport, busy-poll" "$tlat" "$(ratio "$olatb" "$tlat")"
done
if grep -q busy "$tmp/err" 2>/dev/null || [ "$(cut -d' ' -f1 /proc/loadavg | cut -d. -f1)" -ge "$(nproc)" ]; then
  echo "# busy machine (load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs at the end): the figures may not repeat"
fi
