#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# alloc_bw.sh - large puts into gw_mem_alloc memory over intra against
# memcpy, in one run (target: >= 0.9x memcpy bandwidth).
#   gpuwire: GPUWIRE_TRANSPORTS=intra gpuwire perf --loopback --bw-only --alloc
#            --op put --size S --window W (both buffers from gw_mem_alloc: the
#            initiator copies into the target's memfd through its mapping)
#   memcpy:  bench/compare/memcpy_bw.c, one thread copying S bytes between two memfd
#            mappings, as many times as fit in the same duration
# Both copy one thread's worth, the same source into the same destination
# again and again.  The two sides alternate (the order flips each pair) so
# that the machine's load hits both alike; prints GB/s medians [min-max] and
# the ratio of each pair, median [min-max].
#
# usage: bench/compare/alloc_bw.sh [BUILD_DIR]          (default: build)
# env:   SIZES="1M 16M 256M", REPEAT=5 (pairs per size), DURATION=2 (seconds
#        per run), WINDOW=16 (puts outstanding)
set -u
bld=${1:-build}
tool=$bld/gpuwire
sizes=${SIZES:-"1M 16M 256M"}
rep=${REPEAT:-5}
dur=${DURATION:-2}
win=${WINDOW:-16}
[ -x "$tool" ] || { echo "alloc_bw: $tool not built" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
ref=$tmp/memcpy_bw
cc -O2 -o "$ref" "$(dirname "$0")/memcpy_bw.c" || { echo "alloc_bw: building memcpy_bw failed" >&2; exit 1; }

bytes() { # 1M -> 1048576
  echo "$1" | awk '{n=$1+0; u=substr($1, length($1)); if (u=="K") n*=1024; else if (u=="M") n*=1048576; else if (u=="G") n*=1073741824; print n}'
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }
minmax() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {if (NR) printf "%s-%s", lo, hi; else print "-"}'; }
run_gw() { # size -> GB/s
  GPUWIRE_TRANSPORTS=intra "$tool" perf --loopback --bw-only --alloc --op put --size "$1" --window "$win" \
    --duration "$dur" --json 2>>"$tmp/err" | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p' | tail -1
}
run_ref() { "$ref" "$(bytes "$1")" "$dur" 2>>"$tmp/err"; }

echo "# gpuwire intra puts into gw_mem_alloc memory vs memcpy, bandwidth (GB/s, 1e9 bytes)"
echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# machine: $(uname -srm), $(nproc) CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
echo "# load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "# gpuwire: $("$tool" --version), window $win, ${dur}s per run; memcpy: one thread, ${dur}s per run"
echo "# $rep pairs per size, the two sides alternating; medians [min-max]; ratio of each pair, median [min-max]"
echo
for s in $sizes; do
  : >"$tmp/$s.gw"
  : >"$tmp/$s.ref"
  : >"$tmp/$s.ratio"
  for i in $(seq "$rep"); do
    if [ $((i % 2)) = 1 ]; then
      g=$(run_gw "$s")
      m=$(run_ref "$s")
    else
      m=$(run_ref "$s")
      g=$(run_gw "$s")
    fi
    [ -n "$g" ] && echo "$g" >>"$tmp/$s.gw"
    [ -n "$m" ] && echo "$m" >>"$tmp/$s.ref"
    [ -n "$g" ] && [ -n "$m" ] && awk -v a="$g" -v b="$m" 'BEGIN { if (b > 0) printf "%.2f\n", a / b }' >>"$tmp/$s.ratio"
  done
done
printf '%-8s %-24s %-24s %s\n' size "gpuwire put [GB/s]" "memcpy [GB/s]" "ratio"
for s in $sizes; do
  printf '%-8s %-24s %-24s %s\n' "$s" "$(median <"$tmp/$s.gw") [$(minmax <"$tmp/$s.gw")]" \
    "$(median <"$tmp/$s.ref") [$(minmax <"$tmp/$s.ref")]" "$(median <"$tmp/$s.ratio") [$(minmax <"$tmp/$s.ratio")]"
done
if [ -s "$tmp/err" ]; then
  echo
  echo "# stderr of the runs (last lines):"
  grep -v '^\[' "$tmp/err" | tail -5 | sed 's/^/#   /'
fi
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
