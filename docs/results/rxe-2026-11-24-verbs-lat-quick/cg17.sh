#!/bin/bash
set -u
O=${RXEVM_RW_DIR:?}/cg; mkdir -p $O
B=/work/oldbench/gw_verbs_bench_quick5
for N in 1000 3000; do
  GW_BENCH_LAT=complete valgrind --trace-children=yes --tool=callgrind --callgrind-out-file=$O/new.$N.%p timeout 900 $B lat 8 $N $RXE_DEV $RXE_DEV > $O/new.$N.log 2>&1
  echo "new $N rc=$?"
  P=$((18600 + N / 1000))
  valgrind --tool=callgrind --callgrind-out-file=$O/pts.$N.%p ib_write_lat -d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n $N -F -p $P > $O/pts.$N.log 2>&1 &
  sleep 3
  valgrind --tool=callgrind --callgrind-out-file=$O/ptc.$N.%p ib_write_lat -d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n $N -F -p $P 127.0.0.1 > $O/ptc.$N.log 2>&1
  echo "pt $N rc=$?"; wait
done
