#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu_batch_shapes.sh [BUILD_DIR] - the batch shapes of docs/BATCH.md on one GPU
# with the current build only (no A/B): for each transport and shape, the
# list form (gw_xfer_batch: all entries, and by index arrays 0..N-1 where
# `perf --indices` exists, else "-"), the paged form (gw_xfer_pages) and one
# contiguous put of the same bytes, the three alternating, best of REPS
# (default 3); both buffers GPU memory, two processes (`gpuwire perf
# --loopback --mem cuda --window 1`).  Prints GB/s, the ratios to the
# contiguous put and the paged form's post_us.  Logs under $OUT.
# usage: bench/device/gpu_batch_shapes.sh [BUILD_DIR]   TRANSPORTS="intra tcp" REPS=3 SHAPES="4096:16K:64M 64:1M:64M"
set -u
B=${1:-/tmp/gw-build}
O=${OUT:-$PWD/gpu-logs}; mkdir -p "$O"
REPS=${REPS:-3}
gw() { local t=$1; shift; GPUWIRE_TRANSPORTS=$t timeout 60 "$B/gpuwire" perf --loopback --mem cuda --bw-only --json --window 1 --duration 1 "$@" 2>>"$O/shapes-perf.err" | tee -a "$O/shapes-perf.jsonl" | tail -1; }
bw() { sed -n 's/.*"bw_GBps":\([0-9.]*\).*/\1/p'; }
pu() { sed -n 's/.*"post_us":\([0-9.]*\).*/\1/p'; }
mx() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{print (a > b ? a : b)}'; }
r() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{if (b > 0) printf "%.2f", a / b; else print "-"}'; }
{
echo "# GPU batch shapes, $(git log -1 --format=%h 2>/dev/null), $(date -u), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), best of $REPS alternating, window 1"
idx=0; "$B/gpuwire" perf --help 2>&1 | grep -q -- --indices && idx=1
printf '%-6s %-10s %10s %10s %10s %10s %7s %7s %7s %s\n' tl shape list list_idx pages contig r_list r_idx r_pages post_us_pages
for t in ${TRANSPORTS:-intra tcp}; do
  for shape in ${SHAPES:-4096:16K:64M 4096:1K:4M 256:1K:256K 64:1M:64M}; do
    set -- ${shape//:/ }; l=0 x=0 p=0 c=0 pus=""
    for i in $(seq "$REPS"); do
      l=$(mx $l $(gw $t --batch $1 --size $2 | bw))
      [ $idx = 1 ] && x=$(mx $x $(gw $t --batch $1 --size $2 --indices | bw))
      line=$(gw $t --batch $1 --size $2 --pages); p=$(mx $p $(echo "$line" | bw)); pus="$pus$(echo "$line" | pu)/"
      c=$(mx $c $(gw $t --size $3 | bw))
    done
    [ $idx = 1 ] || x=-
    printf '%-6s %-10s %10s %10s %10s %10s %7s %7s %7s %s\n' $t "${1}x$2" $l $x $p $c $(r $l $c) $(r $x $c) $(r $p $c) "$pus"
  done
done
} | tee "$O/shapes.txt"
