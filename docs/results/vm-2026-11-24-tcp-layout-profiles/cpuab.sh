#!/bin/bash
# cpuab.sh REPS label=builddir ... : CPU cost per operation, for when the
# machine is too loaded for wall-clock bandwidth: tcp loopback, window 1,
# --spin-us 0 (an idle side sleeps, so its CPU time is its work), -n OPS
# operations per run (default 30); per round, each shape (4096 x 16 KiB batch,
# 64 x 1 MiB batch, 64 MiB contiguous put) on every build, alternating.
# One line per run: round build shape GB/s ms-CPU-per-op(initiator) ms-CPU-per-op(target) load
reps=$1; shift
ops=${OPS:-30}
for i in $(seq $reps); do
  for shape in "--batch 4096 --size 16K" "--batch 64 --size 1M" "--size 64M"; do
    for lb in "$@"; do
      l=${lb%%=*}; b=${lb#*=}
      GPUWIRE_TRANSPORTS=tcp $b/gpuwire perf --loopback --bw-only --json --window 1 --spin-us 0 -n $ops $shape 2>/dev/null | tail -1 |
        sed -n 's/.*"iterations":\([0-9]*\).*"bw_GBps":\([0-9.]*\).*"cpu_initiator_pct":\([0-9.]*\),"cpu_target_pct":\([0-9.]*\).*"elapsed_s":\([0-9.]*\).*/\1 \2 \3 \4 \5/p' |
        awk -v i=$i -v l=$l -v s=$(echo $shape | tr -d ' -') -v ld=$(cut -d' ' -f1 /proc/loadavg) \
          '{printf "%s %s %s %s %.2f %.2f %s\n", i, l, s, $2, $3/100*$5/$1*1000, $4/100*$5/$1*1000, ld}'
    done
  done
done
