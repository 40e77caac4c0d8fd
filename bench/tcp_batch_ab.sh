#!/bin/bash
# tcp_batch_ab.sh - tcp staged GPU batches, several source trees side by side
# on one GPU (two processes, `gpuwire perf --loopback --mem cuda`, window 1):
# each tree is built here, then every shape runs REPS rounds (default 3),
# the trees' batch runs and one contiguous put of the same bytes (the last
# tree's build) alternating inside each round; bandwidth and post_us (average
# time in one posting call) of every run, then the best per tree.
# usage: TREES="name=DIR name=DIR ..." bench/tcp_batch_ab.sh
#        SHAPES="4096:16K:64M 64:1M:64M" (count:size:contiguous size) REPS=3 DUR=1
# Logs under $OUT (default ./gpu-logs), one tarball tcp-ab-logs.tgz.
set -u
O=${OUT:-$PWD/gpu-logs}
L=/tmp/tcp-ab
mkdir -p "$O" "$L"
REPS=${REPS:-3}
DUR=${DUR:-1}
TREES=${TREES:-"this=."}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
names=""
for t in $TREES; do
  n=${t%%=*} d=${t#*=}
  names="$names $n"
  ( cd "$d" && cmake -S . -B "$L/b-$n" -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$L/b-$n" -j "$(nproc)" --target gpuwire_tool ) >"$L/build-$n.log" 2>&1 &
done
wait
last=${names##* }
for n in $names; do [ -x "$L/b-$n/gpuwire" ] || { echo "build of $n failed:"; tail -20 "$L/build-$n.log"; }; done
gw() { # build, args -> "GB/s post_us"
  local b=$1; shift
  GPUWIRE_TRANSPORTS=tcp timeout 60 "$L/b-$b/gpuwire" perf --loopback --mem cuda --bw-only --json --window 1 --duration "$DUR" "$@" \
    2>>"$L/perf.err" | tee -a "$L/perf-$b.jsonl" | tail -1 |
    sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*"post_us":\([0-9.e+-]*\).*/\1 \2/p'
}
{
  echo "# tcp staged GPU batches: $(date -u), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPUs, load: $(uptime | sed 's/.*load/load/')"
  echo "# trees:$names; window 1, ${DUR}s runs, $REPS rounds alternating; columns: shape round tree GB/s post_us"
  for shape in ${SHAPES:-4096:16K:64M 64:1M:64M}; do
    set -- $(echo "$shape" | tr : ' ')
    for i in $(seq "$REPS"); do
      for n in $names; do echo "$1x$2 $i $n $(gw "$n" --batch "$1" --size "$2")"; done
      echo "$1x$2 $i contig-$3 $(gw "$last" --size "$3")"
    done
  done
} 2>&1 | tee "$O/tcp-ab-rounds.txt"
awk '!/^#/ && NF >= 4 {k=$1" "$3; if ($4 > b[k]) b[k]=$4; p[k]=p[k]" "$5}
     END {for (k in b) printf "%-28s best %6.2f GB/s  post_us%s\n", k, b[k], p[k]}' "$O/tcp-ab-rounds.txt" | sort | tee "$O/tcp-ab-best.txt"
tar czf "$O/tcp-ab-logs.tgz" -C "$L" --exclude='b-*' .
