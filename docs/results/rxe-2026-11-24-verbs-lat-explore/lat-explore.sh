#!/bin/bash
# one-off: lat variants alternating in one guest boot
# VARS: "name:binary:poll_every ..." ; ROUNDS; LAT_N
set -u
N=${LAT_N:-3000}; R=${ROUNDS:-7}
echo "# $(date -u +%T) guest load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) vCPUs, clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
PORT=18600
pt() { PORT=$((PORT+1)); local a="-d $RXE_DEV -x $RXE_GID_INDEX -s 8 -n $N -F -p $PORT"
  timeout 90 ib_write_lat $a >/tmp/lv.srv 2>&1 & local sp=$!
  for t in 1 2 3 4 5 6 7 8; do sleep 0.5; timeout 90 ib_write_lat $a 127.0.0.1 >/tmp/lv.cli 2>&1 && break; kill -0 $sp 2>/dev/null || break; done
  wait $sp; awk '/t_avg/{getline; print $5; exit}' /tmp/lv.cli; }
gw() { GW_BENCH_LAT=${LOOP:-complete} GW_BENCH_POLL_EVERY=$2 GW_BENCH_DESCRIBE=1 timeout 120 $1 lat 8 $N $RXE_DEV $RXE_DEV 2>/dev/null > /tmp/lv.out
  echo "$(sed -n 's/.*typical_usec=\([0-9.]*\).*/\1/p' /tmp/lv.out) $(sed -n 's/.*passes per round trip \([0-9.]*\).*/\1/p' /tmp/lv.out)"; }
names="perftest"; for v in $VARS; do names="$names ${v%%:*}"; done
for r in $(seq $R); do
  line="round $r:"; list=($names); k=${#list[@]}
  for j in $(seq 0 $((k-1))); do
    nm=${list[$(( (j + r) % k ))]}
    if [ $nm = perftest ]; then x=$(pt); else
      for v in $VARS; do [ "${v%%:*}" = $nm ] && { IFS=: read -r _ bin pe <<<"$v"; x=$(gw $bin $pe); }; done; fi
    line="$line $nm=$x"; echo "$nm ${x%% *}" >> /tmp/lv.all
  done
  echo "$line"
done
for nm in $names; do awk -v n=$nm '$1==n && $2+0>0 {print $2}' /tmp/lv.all | sort -g | awk -v n=$nm '{v[NR]=$1} END{m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%s median %.3f min %.3f max %.3f (n=%d)\n", n, m, v[1], v[NR], NR}'; done
