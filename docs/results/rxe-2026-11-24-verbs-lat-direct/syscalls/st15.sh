#!/bin/bash
# in guest: syscalls per round trip of the complete latency loop (gpuwire) and ib_write_lat
set -u
O=${RXEVM_RW_DIR:?}; B=/work/main/build/tests/verbs/gw_verbs_bench
which strace >/dev/null || { echo "no strace in guest"; exit 0; }
for N in 2000 6000; do
  GW_BENCH_LAT=complete strace -f -c -o $O/gw.$N.txt timeout 300 $B lat 8 $N $RXE_DEV $RXE_DEV > $O/gw.$N.log 2>&1; echo "gw $N rc=$?"
  PORT=$((18800+N/1000)); a="-d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n $N -F -p $PORT"
  strace -f -c -o $O/pt.srv.$N.txt timeout 300 ib_write_lat $a > $O/pt.srv.$N.log 2>&1 & sp=$!
  for t in $(seq 20); do sleep 2; strace -f -c -o $O/pt.cli.$N.txt timeout 300 ib_write_lat $a 127.0.0.1 > $O/pt.cli.$N.log 2>&1 && break; kill -0 $sp 2>/dev/null || break; done
  wait $sp; echo "pt $N rc=$?"
done
