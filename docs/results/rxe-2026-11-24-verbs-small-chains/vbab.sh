#!/bin/bash
# in the guest: verbs batch rows, current build (A) against SQ depth 4096 + chains of 512 WRs (B), alternating
export GPUWIRE_IB_DEVICE=$RXE_DEV GPUWIRE_IB_TIMEOUT=16 GPUWIRE_IB_GID_INDEX=$RXE_GID_INDEX
A=/work/main/build/gpuwire B=/work/notes/s18/vb/gpuwire
gw() { local bin=$1 d=$2; shift 2; GPUWIRE_TRANSPORTS=verbs timeout 300 $bin perf --loopback --bw-only --json --window 1 --duration $d "$@" 2>/dev/null | tail -1 | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p'; }
for r in 1 2 3; do
  echo "256x1K r$r A $(gw $A 1 --batch 256 --size 1K) $(gw $A 1 --size 256K) B $(gw $B 1 --batch 256 --size 1K) $(gw $B 1 --size 256K)"
done
for r in 1 2 3; do
  echo "4096x16K r$r A $(gw $A 12 --batch 4096 --size 16K) $(gw $A 12 --size 64M) B $(gw $B 12 --batch 4096 --size 16K) $(gw $B 12 --size 64M)"
done
