#!/bin/bash
# in guest: callgrind of gpuwire's complete lat loop, two iteration counts (new build and the old bench)
set -u
O=${RXEVM_RW_DIR:?}/cg; mkdir -p $O
for which in new old; do
  B=/work/main/build/tests/verbs/gw_verbs_bench
  [ $which = old ] && B=/work/oldbench/gw_verbs_bench_48c16bd
  for N in 1000 3000; do
    GW_BENCH_LAT=complete valgrind --trace-children=yes --tool=callgrind --callgrind-out-file=$O/$which.$N.%p timeout 600 $B lat 8 $N $RXE_DEV $RXE_DEV > $O/$which.$N.log 2>&1
    echo "$which $N rc=$?"
  done
done
