#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# intra_ring.sh [BUILD_DIR] - the intra batch rows at entries up to 16 KiB into
# registered memory, side by side in each round:
#   ring    gpuwire batch, the target polling (`perf --busy-poll`): the
#           entries go through the shared ring its progress engine empties
#           (src/transport/intra/intra_ring.c)
#   cma     the same with GPUWIRE_INTRA_RING_WAIT_US=0: process_vm_writev
#   contig  one contiguous put of the same bytes (CMA; the 0.8x goal's base)
#   ucx     UCX sm doing what NIXL's UCX backend does (bench/compare/ucx_batch_bench.c,
#           UCX_TLS=sm,self; its target spins in ucp_worker_progress, as the
#           ring row's does in gw_progress)
# One operation in flight (post, wait), DUR seconds each; medians over
# ROUNDS of each rate and of the per-round ratios (the host's speed changes
# from minute to minute: a ratio is worth only its own round).
# usage: bench/compare/intra_ring.sh [BUILD_DIR]   ROUNDS=5 DUR=1 SHAPES="256x1K 1024x1K 64x4K 256x8K 4096x16K 256x256"
set -u
bld=${1:-build}
here=$(dirname "$0")
rounds=${ROUNDS:-5}
dur=${DUR:-1}
shapes=${SHAPES:-256x1K 1024x1K 64x4K 256x8K 4096x16K 256x256}
[ -x "$bld/gpuwire" ] || { echo "intra_ring.sh: build first ($bld/gpuwire missing)" >&2; exit 2; }
ucx="$bld/ucx_batch_bench"
if [ ! -x "$ucx" ] || [ "$ucx" -ot "$here/ucx_batch_bench.c" ]; then
  cc -O2 -o "$ucx" "$here/ucx_batch_bench.c" -lucp -lucs 2>/dev/null || ucx=""
fi
gw() { # extra perf args... -> GB/s
  GPUWIRE_TRANSPORTS=intra "$bld/gpuwire" perf --loopback --bw-only --json --window 1 --duration "$dur" "$@" 2>/dev/null |
    tail -1 | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p'
}
med() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.3f\n", a / b}'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# intra ring vs CMA vs UCX sm, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r) $(uname -m), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), gpuwire $(git -C "$here/../.." rev-parse --short HEAD 2>/dev/null)"
echo "# $rounds rounds of ${dur}s runs; GB/s medians; ratios are medians of per-round ratios"
printf '%-9s %7s %7s %7s %7s %11s %11s %9s %9s\n' shape ring cma contig ucx ring/contig cma/contig ring/ucx cma/ucx
for shape in $shapes; do
  n=${shape%x*} s=${shape#*x}
  case $s in *K) b=$(( ${s%K} * 1024 )) ;; *) b=$s ;; esac
  tot=$((n * b))
  : > "$tmp/r"
  i=0
  while [ $i -lt "$rounds" ]; do
    rg=$(gw --busy-poll --batch "$n" --size "$s")
    cm=$(GPUWIRE_INTRA_RING_WAIT_US=0 gw --busy-poll --batch "$n" --size "$s")
    ct=$(gw --busy-poll --size "$tot")
    ux=-
    [ -n "$ucx" ] && ux=$(UCX_TLS=sm,self "$ucx" "$n" "$b" "$dur" 2>/dev/null | awk '$1 == "ucx" {print $4}')
    [ -z "$ux" ] && ux=-
    echo "$rg $cm $ct $ux $(ratio "$rg" "$ct") $(ratio "$cm" "$ct") $(ratio "$rg" "$ux") $(ratio "$cm" "$ux")" >> "$tmp/r"
    [ -n "${VERBOSE:-}" ] && echo "  round $i: $shape ring $rg cma $cm contig $ct ucx $ux" >&2
    i=$((i + 1))
  done
  row=$shape
  for k in 1 2 3 4 5 6 7 8; do
    row="$row $(awk -v k=$k '{print $k}' "$tmp/r" | grep -v '^-$' | med)"
  done
  echo "$row" | awk '{printf "%-9s %7s %7s %7s %7s %11s %11s %9s %9s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
done
