#!/bin/bash
# cg.sh - callgrind of the tracked 8-byte verbs latency loop in the rxe guest.
# usage (host): RXEVM_RW_DIR=DIR [BENCHES="name=/path/to/gw_verbs_bench ..."] [PT=1] \
#   tests/rxe/run-in-rxe-vm.sh docs/results/rxe-2026-11-24-verbs-lat-boots/cg.sh
# Each bench runs N = 1000 and 3000 rounds (GW_BENCH_LAT=complete, both
# sides in one process tree); per put and side: perput.py (difference / 2200)
# per process.  PT=1 also runs ib_write_lat the same way.
set -u
O=${RXEVM_RW_DIR:?}/cg; mkdir -p $O
for nb in ${BENCHES:-}; do
  name=${nb%%=*}; B=${nb#*=}
  for N in 1000 3000; do
    rm -f $O/$name.$N.*
    GW_BENCH_LAT=complete valgrind --trace-children=yes --tool=callgrind --callgrind-out-file=$O/$name.$N.%p \
      timeout 900 $B lat 8 $N $RXE_DEV $RXE_DEV > $O/$name.$N.log 2>&1
    echo "$name $N rc=$?"
  done
done
if [ "${PT:-0}" = 1 ]; then
  for N in 1000 3000; do
    rm -f $O/pts.$N.* $O/ptc.$N.*
    P=$((18600 + N / 1000))
    valgrind --tool=callgrind --callgrind-out-file=$O/pts.$N.%p ib_write_lat -d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n $N -F -p $P > $O/pts.$N.log 2>&1 &
    sleep 3
    valgrind --tool=callgrind --callgrind-out-file=$O/ptc.$N.%p ib_write_lat -d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n $N -F -p $P 127.0.0.1 > $O/ptc.$N.log 2>&1
    echo "pt $N rc=$?"; wait
  done
fi
