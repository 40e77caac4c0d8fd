#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tcp_batch_ab.sh - tcp staged GPU batches, several source trees (and
# settings) side by side on one GPU (two processes, `gpuwire perf --loopback
# --mem cuda`, window 1): each tree is built here, then every shape runs
# REPS rounds (default 3), the trees' batch runs, the variants' batch runs
# and one contiguous put of the same bytes (the last tree's build, default
# settings) alternating inside each round; bandwidth and post_us (average
# time in one posting call) of every run, then the best per tree or variant
# and its ratio to the best contiguous put of the shape.
# usage: TREES="name=DIR name=DIR ..." bench/tcp_batch_ab.sh
#        VARIANTS="label=tree@VAR=value,VAR=value ..." (batch runs of a tree's
#          build with GPUWIRE_* settings, e.g. "scr=this@GPUWIRE_TCP_BATCH_GPU=scratch")
#        SHAPES="4096:16K:64M 64:1M:64M" (count:size:contiguous size) REPS=3 DUR=1
#        TEST=1: also the real-driver batch test (fakecuda_batch_gpu over tcp,
#          no fake driver) of the last tree, once per GPUWIRE_TCP_BATCH_GPU mode
# Logs under $OUT (default ./gpu-logs), one tarball tcp-ab-logs.tgz.
# The lead's unattended re-run on a GPU machine, from a main checkout:
#   OUT=/tmp/o bench/tcp_batch_ab.sh        (this tree only, REPS=3)
set -u
O=${OUT:-$PWD/gpu-logs}
L=/tmp/tcp-ab
mkdir -p "$O" "$L"
REPS=${REPS:-3}
DUR=${DUR:-1}
TREES=${TREES:-"this=."}
VARIANTS=${VARIANTS:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
names=""
for t in $TREES; do names="$names ${t%%=*}"; done
last=${names##* }
for t in $TREES; do
  n=${t%%=*} d=${t#*=}
  tg="gpuwire_tool"
  [ "$n" = "$last" ] && [ -n "${TEST:-}" ] && tg="gpuwire_tool fakecuda_batch_gpu"
  ( cd "$d" && cmake -S . -B "$L/b-$n" -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$L/b-$n" -j "$(nproc)" --target $tg ) >"$L/build-$n.log" 2>&1 &
done
wait
for n in $names; do [ -x "$L/b-$n/gpuwire" ] || { echo "build of $n failed:"; tail -20 "$L/build-$n.log"; }; done
gw() { # build, args -> "GB/s post_us"
  local b=$1; shift
  GPUWIRE_TRANSPORTS=tcp timeout 60 "$L/b-$b/gpuwire" perf --loopback --mem cuda --bw-only --json --window 1 --duration "$DUR" "$@" \
    2>>"$L/perf.err" | tee -a "$L/perf-$b.jsonl" | tail -1 |
    sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*"post_us":\([0-9.e+-]*\).*/\1 \2/p'
}
{
  echo "# tcp staged GPU batches: $(date -u), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPUs, load: $(uptime | sed 's/.*load/load/')"
  echo "# trees:$names; variants: ${VARIANTS:-none}; window 1, ${DUR}s runs, $REPS rounds alternating; columns: shape round tree GB/s post_us"
  for shape in ${SHAPES:-4096:16K:64M 64:1M:64M}; do
    set -- $(echo "$shape" | tr : ' ')
    for i in $(seq "$REPS"); do
      for n in $names; do echo "$1x$2 $i $n $(gw "$n" --batch "$1" --size "$2")"; done
      for v in $VARIANTS; do
        lab=${v%%=*} rest=${v#*=}
        tree=${rest%%@*} envs=${rest#*@}
        echo "$1x$2 $i $lab $(export $(echo "$envs" | tr , ' '); gw "$tree" --batch "$1" --size "$2")"
      done
      echo "$1x$2 $i contig-$3 $(gw "$last" --size "$3")"
    done
  done
} 2>&1 | tee "$O/tcp-ab-rounds.txt"
# best and median per tree or variant, each against the contiguous put's best and median
awk '!/^#/ && NF >= 4 {k=$1" "$3; n[k]++; v[k, n[k]]=$4; p[k]=p[k]" "int($5); if ($3 ~ /^contig/) ck[$1]=k}
     function med(k,   i, j, t, m, a) { m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i];
       for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
       return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
     function best(k,   i, b) { b = 0; for (i = 1; i <= n[k]; i++) if (v[k, i] > b) b = v[k, i]; return b }
     END {for (k in n) {split(k, a, " "); c = ck[a[1]];
       printf "%-24s best %6.2f x%.2f  median %6.2f x%.2f  (GB/s, x contig)  post_us%s\n", k, best(k),
         (c != "" && best(c) > 0 ? best(k) / best(c) : 0), med(k), (c != "" && med(c) > 0 ? med(k) / med(c) : 0), p[k]}}' \
  "$O/tcp-ab-rounds.txt" | sort | tee "$O/tcp-ab-best.txt"
if [ -n "${TEST:-}" ]; then
  for m in direct scratch; do
    GPUWIRE_TCP_BATCH_GPU=$m GPUWIRE_TRANSPORTS=tcp BATCH_GPU_EXPECT="GPU batches: copy kernel" timeout 120 \
      "$L/b-$last/tests/fakecuda/fakecuda_batch_gpu" >"$L/test-batch-gpu-$m.log" 2>&1
    echo "real-driver fakecuda_batch_gpu over tcp, GPUWIRE_TCP_BATCH_GPU=$m: exit $? ($(grep -E 'all checks|check\(s\) failed' "$L/test-batch-gpu-$m.log" | tr '\n' ' ' | cut -c1-300))"
  done | tee "$O/tcp-ab-test.txt"
fi
tar czf "$O/tcp-ab-logs.tgz" -C "$L" --exclude='b-*' .
