#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu_batch_device.sh - batched transfers on a GPU host, one GPU: the batch
# test with real GPU memory (intra: CUDA IPC with the copy kernel; tcp:
# staged), then the GPU rows of the batch benchmark side by side, best of
# REPS: 4096 scattered 16 KiB blocks (and 1 KiB blocks) between two processes
# as one batch against one contiguous put of the same bytes, over intra and
# over tcp (staged through pinned host memory).  Logs under $OUT.
# usage: bench/device/gpu_batch_device.sh [BUILD_DIR]
set -u
OUT=${OUT:-$PWD/gpu-logs}
B=${1:-/tmp/gw-build}
REPS=${REPS:-3}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{
  date -u; uname -r; nproc
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv 2>&1
} | tee "$OUT/host.txt"
if [ ! -x "$B/gpuwire" ]; then
  cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.log" 2>&1
  cmake --build "$B" -j "$(nproc)" --target gpuwire_tool fakecuda_batch_gpu >>"$OUT/build.log" 2>&1 ||
    { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
fi
echo "== batch test, real GPU memory"
for tl in intra tcp; do
  want=""; [ "$tl" = intra ] && want="GPU batches: copy kernel"
  GPUWIRE_TRANSPORTS=$tl BATCH_GPU_EXPECT="$want" timeout 120 "$B/tests/fakecuda/fakecuda_batch_gpu" \
    >"$OUT/test-$tl.log" 2>&1
  echo "batch_gpu over $tl: exit $? ($(grep -E 'path after|all checks|check\(s\) failed' "$OUT/test-$tl.log" | tr '\n' ' ' | cut -c1-400))"
done
echo "== benchmark (best of $REPS, one operation in flight, both buffers GPU memory)"
gw() { # transport args -> GB/s
  local t=$1; shift
  GPUWIRE_TRANSPORTS=$t timeout 60 "$B/gpuwire" perf --loopback --mem cuda --bw-only --json --window 1 --duration 1 "$@" \
    2>>"$OUT/perf.err" | tee -a "$OUT/perf.jsonl" | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p' | tail -1
}
max() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{print (a > b ? a : b)}'; }
printf '%-6s %-12s %12s %12s %7s\n' transport shape "batch[GB/s]" "contig[GB/s]" ratio | tee "$OUT/bench.txt"
for t in intra tcp; do
  for shape in "4096 16K 67108864" "4096 1K 4194304"; do
    set -- $shape
    bb=0 cb=0
    for i in $(seq "$REPS"); do
      bb=$(max "$bb" "$(gw "$t" --batch "$1" --size "$2")")
      cb=$(max "$cb" "$(gw "$t" --size "$3")")
    done
    printf '%-6s %-12s %12s %12s %7s\n' "$t" "${1}x$2" "$bb" "$cb" \
      "$(awk -v a="$bb" -v b="$cb" 'BEGIN{if (b > 0) printf "%.2f", a/b; else print "-"}')" | tee -a "$OUT/bench.txt"
  done
done
grep -h '"path"' "$OUT/perf.jsonl" | sed -n 's/.*"path":\("[^"]*"\).*/\1/p' | sort -u | head -4
