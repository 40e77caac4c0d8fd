#!/bin/bash
NEW=/work/oldbench/gw_verbs_bench_ab_new; OLD=/work/oldbench/gw_verbs_bench_c473423
for r in $(seq 16); do
  for b in $( [ $((r % 2)) = 0 ] && echo "$NEW $OLD" || echo "$OLD $NEW"); do
    v=$(timeout 90 $b put ${SIZE:-8} 20000 $RXE_DEV $RXE_DEV 2>/dev/null | sed -n 's/.*ops_s=\([0-9.]*\).*/\1/p')
    [ $b = $NEW ] && n=$v || o=$v
  done
  echo "round $r new $n old $o"
done
