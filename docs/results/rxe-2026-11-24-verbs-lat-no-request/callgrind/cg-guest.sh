#!/bin/bash
# in guest: callgrind of gpuwire lat loop vs ib_write_lat, two iteration counts
set -u
O=${RXEVM_RW_DIR:?}/cg; mkdir -p $O
B=/work/main/build/tests/verbs/gw_verbs_bench
for N in 1000 3000; do
  GW_BENCH_LAT=complete valgrind --trace-children=yes --tool=callgrind --callgrind-out-file=$O/gw.$N.%p timeout 600 $B lat 8 $N $RXE_DEV $RXE_DEV > $O/gw.$N.log 2>&1
  echo "gw $N rc=$?"
  PORT=$((18700+N/1000)); a="-d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n $N -F -p $PORT"
  valgrind --trace-children=yes --tool=callgrind --callgrind-out-file=$O/pt.srv.$N.%p timeout 600 ib_write_lat $a > $O/pt.srv.$N.log 2>&1 & sp=$!
  for t in $(seq 20); do sleep 2; valgrind --trace-children=yes --tool=callgrind --callgrind-out-file=$O/pt.cli.$N.%p timeout 600 ib_write_lat $a 127.0.0.1 > $O/pt.cli.$N.log 2>&1 && break; kill -0 $sp 2>/dev/null || break; done
  wait $sp; echo "pt $N rc=$?"
done
