#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tcp_gpu_knobs.sh [BUILD_DIR] - GPU blocks staged over tcp (target: at
# >= 0.8x the contiguous staged rate) under
# the tcp settings that shape that path, one GPU, two processes: for each
# setting, ROUNDS rounds of the batch (4096 x 16 KiB, list form) and the
# contiguous 64 MiB put, alternating (`gpuwire perf --loopback --mem cuda
# --window 1`), then the best of each and their ratio.  For choosing the
# defaults on a GPU host; logs under $OUT.
# usage: bench/tcp_gpu_knobs.sh /tmp/gw-build    ROUNDS=2 SETTINGS="default GPUWIRE_TCP_STREAMS=8 ..."
set -u
B=${1:-/tmp/gw-build}
OUT=${OUT:-$PWD/gpu-logs}
mkdir -p "$OUT"
rounds=${ROUNDS:-2}
settings=${SETTINGS:-default GPUWIRE_TCP_STREAMS=8 GPUWIRE_TCP_STREAMS=8,GPUWIRE_TCP_THREADS=8 GPUWIRE_TCP_BATCH_INFLIGHT=16 GPUWIRE_TCP_CHUNK=4M GPUWIRE_TCP_BATCH_GPU=scratch}
gw() { # env-list args -> GB/s
  local e=$1; shift
  local envs=()
  [ "$e" != default ] && IFS=, read -r -a envs <<< "$e"
  env "${envs[@]}" GPUWIRE_TRANSPORTS=tcp timeout 60 "$B/gpuwire" perf --loopback --mem cuda --bw-only --json --window 1 --duration 1 "$@" \
    2>>"$OUT/knobs.err" | tee -a "$OUT/knobs.jsonl" | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p' | tail -1
}
max() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{print (a > b ? a : b)}'; }
printf '%-55s %10s %10s %7s\n' setting "batch" "contig" ratio
for s in $settings; do
  bb=0 cb=0
  for r in $(seq "$rounds"); do
    bb=$(max "$bb" "$(gw "$s" --batch 4096 --size 16K)")
    cb=$(max "$cb" "$(gw "$s" --size 64M)")
  done
  printf '%-55s %10s %10s %7s\n' "$s" "$bb" "$cb" "$(awk -v a="$bb" -v b="$cb" 'BEGIN{if (b > 0) printf "%.2f", a/b; else print "-"}')"
done
