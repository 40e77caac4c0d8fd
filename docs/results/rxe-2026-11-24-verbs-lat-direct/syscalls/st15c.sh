#!/bin/bash
set -u
O=${RXEVM_RW_DIR:?}; B=/work/main/build/tests/verbs/gw_verbs_bench
for N in 2000 6000; do
  mkdir -p $O/ep$N; EPC_DIR=$O/ep$N LD_PRELOAD=/work/notes/shim/cnt.so GW_BENCH_LAT=complete timeout 300 $B lat 8 $N $RXE_DEV $RXE_DEV; echo "rc=$?"
  cat $O/ep$N/*
done
