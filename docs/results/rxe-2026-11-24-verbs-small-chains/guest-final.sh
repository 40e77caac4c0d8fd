#!/bin/bash
# in the guest: this folder's verbs rows in one boot
cd /work/main
echo "== verbs_api (chains per pass)"
T=build/tests/verbs
timeout 240 env GPUWIRE_IB_DEVICE=$RXE_DEV GPUWIRE_IB_GID_INDEX=$RXE_GID_INDEX $T/verbs_api rxe0 rxe0 2>&1 | grep -E "batch of|small puts|passed|FAIL" | head -5
export GPUWIRE_IB_DEVICE=$RXE_DEV GPUWIRE_IB_TIMEOUT=16 GPUWIRE_IB_GID_INDEX=$RXE_GID_INDEX
A=/work/notes/s18/va/gpuwire B=/work/main/build/gpuwire
gw() { local bin=$1 d=$2; shift 2; GPUWIRE_TRANSPORTS=verbs timeout 300 $bin perf --loopback --bw-only --json --window 1 --duration $d "$@" 2>/dev/null | tail -1 | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p'; }
echo "== A/B: old (c527a99) batch contig | new batch contig"
for r in 1 2 3; do
  echo "256x1K r$r old $(gw $A 1 --batch 256 --size 1K) $(gw $A 1 --size 256K) new $(gw $B 1 --batch 256 --size 1K) $(gw $B 1 --size 256K)"
done
for r in 1 2 3; do
  echo "4096x16K r$r old $(gw $A 10 --batch 4096 --size 16K) $(gw $A 10 --size 64M) new $(gw $B 10 --batch 4096 --size 16K) $(gw $B 10 --size 64M)"
done
echo "== verbs_floor"
ROUNDS=3 bench/verbs_floor.sh build
echo "== verbs_batch"
bench/verbs_batch.sh build
