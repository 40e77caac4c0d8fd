#!/bin/bash
# host-memory tcp batches: main vs h13t vs one contiguous put, alternating, per-run figures
B=/tmp/h13t-bin
run() { GPUWIRE_PEER_TIMEOUT_MS=120000 GPUWIRE_TRANSPORTS=tcp timeout 150 $B/gpuwire-$1 perf --loopback --bw-only --json --window 1 --duration 2 "${@:2}" 2>/dev/null | tail -1 | sed -n 's/.*"bw_GBps":\([0-9.]*\).*/\1/p'; }
echo "# host tcp batch A/B: $(date -u), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); columns: shape round main h13t contig(h13t build) load"
for i in 1 2 3; do
  for shape in "256 1K 256K" "4096 16K 64M" "64 1M 64M"; do
    set -- $shape
    m=$(run main --batch $1 --size $2); h=$(run h13t --batch $1 --size $2); c=$(run h13t --size $3)
    echo "$1x$2 $i ${m:-none} ${h:-none} ${c:-none} $(cut -d' ' -f1 /proc/loadavg)"
  done
done
echo "# end $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)"
