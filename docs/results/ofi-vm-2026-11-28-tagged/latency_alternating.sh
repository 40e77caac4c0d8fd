#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# alternating latency runs: gpuwire perf over ofi shm (libfabric 2.6), tagged path auto vs off,
# and fi_rdm_pingpong (fabtests 2.6) -p shm -S 8; every program under chrt -f 10
W=/work/wt-otag; L=$W/.lfcuda/lib; B=$W/build/gpuwire; port=12480
export GPUWIRE_OFI_LIB=$L/libfabric.so.1 LD_LIBRARY_PATH=$L GPUWIRE_OFI_HMEM=off GPUWIRE_TRANSPORTS=ofi
prov=${PROV:-shm}
for i in 1 2 3 4 5 6; do
  for tg in on off; do
    for sz in 8 4096 16384; do
      if [ $sz = 8 ]; then a="--lat-only --busy-poll"; else a="--busy-poll"; fi
      GPUWIRE_OFI_TAGGED=$tg GPUWIRE_OFI_PROVIDER=$prov timeout 60 chrt -f 10 $B perf --loopback --duration 2 --json --op send --size $sz $a 2>/dev/null | \
        python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('round $i tagged=$tg size=$sz lat_p50_us %.3f lat_avg_us %.3f GBps %.3f' % (d['lat_us_p50'], d['lat_us_avg'], d['bw_GBps']))"
    done
  done
  port=$((port+1))
  timeout 60 chrt -f 10 $W/.lfcuda/bin/fi_rdm_pingpong -p $prov -S 8 -I 20000 -s 127.0.0.1 -B $port >/dev/null 2>&1 &
  sleep 0.5
  timeout 60 chrt -f 10 $W/.lfcuda/bin/fi_rdm_pingpong -p $prov -S 8 -I 20000 -P $port 127.0.0.1 2>/dev/null | awk -v r=$i '$1 ~ /^[0-9]/ {print "round " r " fi_rdm_pingpong size=8 usec_xfer " $6}'
  wait
done
