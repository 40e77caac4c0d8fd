#!/bin/bash
B=/work/main/build/tests/verbs/gw_verbs_bench
for r in 1 2 3 4; do
  GW_BENCH_DESCRIBE=1 GW_BENCH_LAT=complete timeout 120 $B lat 8 5000 $RXE_DEV $RXE_DEV 2>&1 | grep -E "typical|already|path"
  ib_write_lat -d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n 5000 -F -p 18600 > srv.txt 2>&1 &
  sleep 1; ib_write_lat -d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n 5000 -F -p 18600 127.0.0.1 2>&1 | awk '/t_avg/{getline; print "perftest typical", $5}'; wait
done
