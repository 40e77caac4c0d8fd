#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ofi_loopback.sh - gpuwire over the ofi transport (libfabric) on loopback,
# per provider, against gpuwire's own tcp transport and libfabric's
# fi_pingpong with the same provider, in one run on this machine:
#   put 4 MiB bandwidth       ofi vs tcp transport; vs fi_pingpong 4 MiB
#   send 8 B latency (avg)    ofi vs tcp transport; vs fi_pingpong 8 B
# (fi_pingpong moves messages; its usec/xfer and MB/sec are taken as it
# prints them.)
#
# usage: bench/compare/ofi_loopback.sh [BUILD_DIR]        (default: build)
# env:   PROVIDERS="tcp shm", DURATION=2 (seconds per gpuwire phase),
#        REPEAT=3 (the median is reported), PP_ITERS=5000 (fi_pingpong 8 B
#        iterations; 4 MiB runs a tenth of them), PP_PORT=12360.
# Needs fi_pingpong (libfabric-bin) for its columns; without it they are "-".
set -u
bld=${1:-build}
tool=$bld/gpuwire
dur=${DURATION:-2}
rep=${REPEAT:-3}
iters=${PP_ITERS:-5000}
port=${PP_PORT:-12360}
[ -x "$tool" ] || { echo "ofi_loopback: $tool not built (make build)" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print ""}'; }
jget() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
have_pp=0
command -v fi_pingpong >/dev/null && have_pp=1

echo "# gpuwire ofi loopback benchmark"
echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# machine: $(uname -srm), $(nproc) CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
echo "# load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "# gpuwire: $("$tool" --version); fi_pingpong: $([ $have_pp = 1 ] && echo present || echo absent)"
echo "# each figure: median of $rep runs"

gw() { # out-name, transports, provider, perf args...
  out=$1 tls=$2 prov=$3
  shift 3
  GPUWIRE_TRANSPORTS=$tls GPUWIRE_OFI_PROVIDER=$prov timeout 120 "$tool" perf --loopback --duration "$dur" --json "$@" \
    >>"$tmp/$out" 2>>"$tmp/err" || echo "gpuwire perf ($tls $prov $*) failed: $(tail -1 "$tmp/err")" >&2
}
pp() { # provider, size, iterations -> prints "MB/sec usec/xfer" of the client
  (timeout 120 fi_pingpong -p "$1" -e rdm -S "$2" -I "$3" -B "$port" >/dev/null 2>&1 &)
  sleep 0.5
  timeout 120 fi_pingpong -p "$1" -e rdm -S "$2" -I "$3" -P "$port" 127.0.0.1 2>/dev/null |
    awk '$1 ~ /^[0-9]/ {print $6, $7}'
  sleep 0.3
}
for i in $(seq "$rep"); do
  gw tcp_bw tcp "" --op put --size 4M --bw-only
  gw tcp_lat tcp "" --op send --size 8 --lat-only
  for p in ${PROVIDERS:-tcp shm}; do
    gw "ofi_${p}_bw" ofi "$p" --op put --size 4M --bw-only
    gw "ofi_${p}_lat" ofi "$p" --op send --size 8 --lat-only
    if [ $have_pp = 1 ]; then
      pp "$p" 4194304 $((iters / 10 > 0 ? iters / 10 : 1)) | awk '{printf "%.4f\n", $1 * 1.048576 / 1000}' >>"$tmp/pp_${p}_bw"
      pp "$p" 8 "$iters" | awk '{print $2}' >>"$tmp/pp_${p}_lat"
    fi
  done
done
tbw=$(jget bw_GBps <"$tmp/tcp_bw" | median)
tlat=$(jget lat_us_avg <"$tmp/tcp_lat" | median)
printf '%-9s %-28s %10s  %-24s %10s %7s\n' provider measurement gpuwire-ofi reference "ref value" ratio
for p in ${PROVIDERS:-tcp shm}; do
  obw=$(jget bw_GBps <"$tmp/ofi_${p}_bw" 2>/dev/null | median)
  olat=$(jget lat_us_avg <"$tmp/ofi_${p}_lat" 2>/dev/null | median)
  pbw=$([ -s "$tmp/pp_${p}_bw" ] && median <"$tmp/pp_${p}_bw")
  plat=$([ -s "$tmp/pp_${p}_lat" ] && median <"$tmp/pp_${p}_lat")
  printf '%-9s %-28s %10s  %-24s %10s %7s\n' "$p" "put 4 MiB bandwidth [GB/s]" "$obw" "gpuwire tcp transport" "$tbw" "$(ratio "$obw" "$tbw")"
  printf '%-9s %-28s %10s  %-24s %10s %7s\n' "$p" "put 4 MiB bandwidth [GB/s]" "$obw" "fi_pingpong 4 MiB" "${pbw:--}" "$(ratio "$obw" "$pbw")"
  printf '%-9s %-28s %10s  %-24s %10s %7s\n' "$p" "send 8 B latency avg [us]" "$olat" "gpuwire tcp transport" "$tlat" "$(ratio "$olat" "$tlat")"
  printf '%-9s %-28s %10s  %-24s %10s %7s\n' "$p" "send 8 B latency avg [us]" "$olat" "fi_pingpong 8 B" "${plat:--}" "$(ratio "$olat" "$plat")"
done
if grep -q busy "$tmp/err" 2>/dev/null || [ "$(cut -d' ' -f1 /proc/loadavg | cut -d. -f1)" -ge "$(nproc)" ]; then
  echo "# busy machine (load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs at the end): the figures may not repeat"
fi
