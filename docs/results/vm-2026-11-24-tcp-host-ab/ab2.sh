#!/bin/bash
B=/tmp/h13t-bin
run() { GPUWIRE_PEER_TIMEOUT_MS=120000 GPUWIRE_TRANSPORTS=tcp timeout 150 $B/gpuwire-$1 perf --loopback --bw-only --json --window 1 --duration 2 "${@:2}" 2>/dev/null | tail -1 | sed -n 's/.*"bw_GBps":\([0-9.]*\).*"cpu_initiator_pct":\([0-9.]*\),"cpu_target_pct":\([0-9.]*\).*/\1 cpu \2\/\3/p'; }
echo "# reversed order (h13t first): $(date -u), load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in 1 2 3; do
  for shape in "64 1M" "4096 16K"; do
    set -- $shape
    h=$(run h13t --batch $1 --size $2); m=$(run main --batch $1 --size $2)
    echo "$1x$2 $i h13t ${h:-none} main ${m:-none} load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
