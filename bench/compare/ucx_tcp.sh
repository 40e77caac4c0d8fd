#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ucx_tcp.sh - gpuwire over tcp loopback against UCX's ucx_perftest on its tcp
# transport, in one run: put bandwidth of 1 MiB and 8-byte put latency.
# usage: bench/compare/ucx_tcp.sh [BUILD_DIR]   (needs ucx-utils: apt-get install ucx-utils)
set -u
bld=${1:-build}
port=${UCX_PORT:-13339}
command -v ucx_perftest >/dev/null || { echo "ucx_perftest not installed (apt-get install ucx-utils)"; exit 77; }
ucx() { # test args...
  UCX_TLS=tcp,self ucx_perftest -p "$port" >/dev/null 2>&1 &
  spid=$!
  sleep 0.7
  UCX_TLS=tcp,self timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t "$@" 2>/dev/null | awk '/^Final:/ {print}'
  wait "$spid" 2>/dev/null
}
echo "# gpuwire vs ucx_perftest (UCX_TLS=tcp,self), $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
# Final: iters, typical/avg/overall latency (us), avg/overall bandwidth (MB/s), ...
ubw=$(ucx ucp_put_bw -s 1048576 -n 3000 | awk '{print $6 / 1000}')
ulat=$(ucx ucp_put_lat -s 8 -n 20000 | awk '{print $4}')
gbw=$(GPUWIRE_TRANSPORTS=tcp "$bld/gpuwire" perf --loopback --op put --size 1M --duration 2 --bw-only --json |
      sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p')
glat=$(GPUWIRE_TRANSPORTS=tcp "$bld/gpuwire" perf --loopback --op put --size 8 --duration 2 --lat-only --json |
       sed -n 's/.*"lat_us_avg":\([0-9.e+-]*\).*/\1/p')
printf '%-32s %10s %10s %8s\n' measurement gpuwire ucx ratio
printf '%-32s %10s %10s %8s\n' "put 1 MiB bandwidth [GB/s]" "$gbw" "$ubw" "$(awk -v a="$gbw" -v b="$ubw" 'BEGIN{printf "%.2f", a/b}')"
printf '%-32s %10s %10s %8s\n' "put 8 B latency avg [us]" "$glat" "$ulat" "$(awk -v a="$glat" -v b="$ulat" 'BEGIN{printf "%.2f", a/b}')"
