#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tcp_gpu_batch_device.sh [BUILD_DIR] - tcp staged GPU batches on a GPU host,
# one GPU, two processes (`gpuwire perf --loopback`): 4096 scattered 16 KiB
# blocks (and 1 KiB blocks) as one batch against one contiguous put of the
# same bytes, both buffers GPU memory, GPUWIRE_TRANSPORTS=tcp; the two
# alternate, REPS rounds (default 3), every figure printed, best and median
# ratio at the end (goal: batch >= 0.8x the contiguous staged rate).  Runs
# the batch test with real GPU memory first (the copy kernel must show in the
# path).  Builds into BUILD_DIR (default /tmp/gw-build) when it holds no
# gpuwire.  Logs under $OUT (default ./gpu-logs), files prefixed tcp-.
# usage: bench/device/tcp_gpu_batch_device.sh [BUILD_DIR]     REPS=3 DUR=1
#        SHAPES="4096:16K:64M 4096:1K:4M 64:1M:64M" (count:size:contiguous size)
set -u
OUT=${OUT:-$PWD/gpu-logs}
B=${1:-/tmp/gw-build}
REPS=${REPS:-3}
DUR=${DUR:-1}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{
  date -u; uname -r; nproc; uptime
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv 2>&1
  git log --oneline -1 2>/dev/null
} | tee "$OUT/tcp-host.txt"
if [ ! -x "$B/gpuwire" ]; then
  cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/tcp-build.log" 2>&1
  cmake --build "$B" -j "$(nproc)" --target gpuwire_tool fakecuda_batch_gpu it_batch >>"$OUT/tcp-build.log" 2>&1 ||
    { echo "build failed"; tail -30 "$OUT/tcp-build.log"; exit 1; }
fi
echo "== batch tests, real GPU memory, tcp"
GPUWIRE_TRANSPORTS=tcp BATCH_GPU_EXPECT="GPU batches: copy kernel" timeout 120 "$B/tests/fakecuda/fakecuda_batch_gpu" \
  >"$OUT/tcp-test-batch-gpu.log" 2>&1
echo "fakecuda_batch_gpu over tcp: exit $? ($(grep -E 'path after|all checks|check\(s\) failed' "$OUT/tcp-test-batch-gpu.log" | tr '\n' ' ' | cut -c1-400))"
GPUWIRE_TRANSPORTS=tcp timeout 120 "$(find "$B" -name it_batch -type f -perm -u+x | head -1)" >"$OUT/tcp-test-it-batch.log" 2>&1
echo "it_batch: exit $? ($(tail -1 "$OUT/tcp-test-it-batch.log"))"
echo "== tcp staged GPU batch vs contiguous, alternating, $REPS rounds of ${DUR}s"
gw() { # args -> GB/s
  GPUWIRE_TRANSPORTS=tcp timeout 60 "$B/gpuwire" perf --loopback --mem cuda --bw-only --json --window 1 --duration "$DUR" "$@" \
    2>>"$OUT/tcp-perf.err" | tee -a "$OUT/tcp-perf.jsonl" | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p' | tail -1
}
for shape in ${SHAPES:-4096:16K:64M 4096:1K:4M}; do
  set -- $(echo "$shape" | tr : ' ')
  for i in $(seq "$REPS"); do
    echo "$1x$2 round $i batch $(gw --batch "$1" --size "$2") contig $(gw --size "$3")"
  done
done | tee "$OUT/tcp-bench-rounds.txt"
awk '{split($0,a," "); r=a[5]/(a[7]>0?a[7]:1); s[$1]=s[$1]" "r; if (a[5]>b[$1]) b[$1]=a[5]; if (a[7]>c[$1]) c[$1]=a[7]}
     END{for (k in b) printf "%-10s best batch %s GB/s, best contig %s GB/s, best/best %.2f; per-round ratios%s\n", k, b[k], c[k], b[k]/c[k], s[k]}' \
  "$OUT/tcp-bench-rounds.txt" | tee "$OUT/tcp-bench.txt"
echo "== post_us (average time in one posting call) per run, in order:"
sed -n 's/.*"post_us":\([0-9.e+-]*\).*/\1/p' "$OUT/tcp-perf.jsonl" | tr '\n' ' '; echo
grep -h '"path"' "$OUT/tcp-perf.jsonl" | sed -n 's/.*"path":\("[^"]*"\).*/\1/p' | sort -u | head -4
