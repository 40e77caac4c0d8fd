#!/bin/bash
export GPUWIRE_IB_DEVICE=$RXE_DEV GPUWIRE_IB_TIMEOUT=16 GPUWIRE_IB_GID_INDEX=$RXE_GID_INDEX
gw() { local bin=$1 d=$2; shift 2; GPUWIRE_TRANSPORTS=verbs timeout 300 $bin perf --loopback --bw-only --json --window 1 --duration $d "$@" 2>/dev/null | tail -1 | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p'; }
for r in 1 2; do
  for v in a b c d e f; do
    bin=/work/notes/s18/v$v/gpuwire; [ $v = a ] && bin=/work/main/build/gpuwire; [ $v = b ] && bin=/work/notes/s18/vb/gpuwire
    echo "4096x16K r$r $v $(gw $bin 8 --batch 4096 --size 16K)"
  done
  echo "contig r$r a $(gw /work/main/build/gpuwire 8 --size 64M)"
done
