#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tcp_loopback.sh - gpuwire over tcp loopback against iperf3 and qperf, in one
# run on this machine, with the ratios the performance targets are stated in:
#   put of 4 MiB bandwidth  >= iperf3 single-stream loopback rate
#   small-message latency   <= 1.1 x qperf tcp_lat
#
# usage: bench/compare/tcp_loopback.sh [BUILD_DIR]      (default: build)
# env:   DURATION=3 (seconds per measurement), REPEAT=3 (runs per measurement;
#        the median is reported), GPUWIRE_* settings pass through to both
#        gpuwire processes, PERF_ARGS="--busy-poll" adds gpuwire perf options.
# Needs iperf3 and qperf (scripts/install-deps.sh installs them); a missing
# one is reported and its ratios are left out.
set -u
bld=${1:-build}
tool=$bld/gpuwire
dur=${DURATION:-3}
rep=${REPEAT:-3}
extra=${PERF_ARGS:-}
iport=${IPERF_PORT:-15201}
qport=${QPERF_PORT:-19766}
[ -x "$tool" ] || { echo "tcp_loopback: $tool not built (make build)" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
ipid= qpid=
cleanup() {
  [ -n "$ipid" ] && kill "$ipid" 2>/dev/null
  [ -n "$qpid" ] && kill "$qpid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print ""}'; }
jget() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }

echo "# gpuwire tcp loopback benchmark"
echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# machine: $(uname -srm), $(nproc) CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
echo "# load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "# gpuwire: $("$tool" --version), $(env | grep '^GPUWIRE_' | tr '\n' ' ')"
echo "# each figure: median of $rep runs of ${dur}s; the runs of gpuwire and the references alternate"
echo

# ---- like for like congestion control: gpuwire's local data connections
# leave a pacing bbr for cubic (GPUWIRE_TCP_CONGESTION=auto), so iperf3 gets
# the same (-C) where the system runs bbr; IPERF_CC overrides, IPERF_CC= none
sys_cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)
icc=
case "${GPUWIRE_TCP_CONGESTION:-auto}" in
  auto) [ "$sys_cc" = bbr ] && icc=cubic ;;
  system) ;;
  *) icc=$GPUWIRE_TCP_CONGESTION ;;
esac
icc=${IPERF_CC-$icc}
echo "# congestion control: system $sys_cc; gpuwire GPUWIRE_TCP_CONGESTION=${GPUWIRE_TCP_CONGESTION:-auto}; iperf3 ${icc:-system's} (qperf: system's)"

# ---- reference servers, started once
have_iperf=0 have_qperf=0
if command -v iperf3 >/dev/null; then
  iperf3 -s -p "$iport" >/dev/null 2>&1 &
  ipid=$!
  have_iperf=1
else
  echo "iperf3 not installed: its ratios are left out"
fi
if command -v qperf >/dev/null; then
  qperf --listen_port "$qport" >/dev/null 2>&1 &
  qpid=$!
  have_qperf=1
else
  echo "qperf not installed: its ratios are left out"
fi
sleep 0.3

# ---- the runs: each repetition measures everything back to back, so that a
# change in the machine's load hits gpuwire and the references alike
run_gw() { # name, perf args...
  name=$1
  shift
  # tcp, not the intra-host transport that loopback would otherwise pick
  GPUWIRE_TRANSPORTS=${GPUWIRE_TRANSPORTS:-tcp} \
    "$tool" perf --loopback --duration "$dur" --json "$@" $extra >"$tmp/$name.$i" 2>>"$tmp/err" ||
    { echo "gpuwire perf $* failed:"; cat "$tmp/err"; exit 1; }
}
for i in $(seq "$rep"); do
  run_gw bw --op put --size 4M --bw-only
  if [ $have_iperf = 1 ]; then
    for p in 1 2; do
      # GB/s (1e9 bytes/s) at the receiver
      iperf3 -c 127.0.0.1 -p "$iport" -P $p -t "$dur" -f m ${icc:+-C "$icc"} >"$tmp/ip$p.out" 2>&1
      grep receiver "$tmp/ip$p.out" | tail -1 |
        awk '{for (k = 1; k < NF; k++) if ($(k + 1) == "Mbits/sec") printf "%.4f\n", $k / 8000}' >>"$tmp/ip$p"
    done
  fi
  run_gw lat --op put --size 8 --lat-only
  run_gw slat --op send --size 8 --lat-only
  run_gw blat --op put --size 8 --lat-only --busy-poll
  run_gw bslat --op send --size 8 --lat-only --busy-poll
  if [ $have_qperf = 1 ]; then
    qperf -lp "$qport" -t "$dur" 127.0.0.1 tcp_bw tcp_lat >"$tmp/q.out" 2>&1
    awk '/bw *=/ {u = $4; v = $3; if (u ~ /^MB/) v /= 1000; else if (u ~ /^KB/) v /= 1e6;
                  printf "%.4f\n", v}' "$tmp/q.out" >>"$tmp/qbw"
    awk '/latency *=/ {u = $4; v = $3; if (u == "ms") v *= 1000; else if (u == "ns") v /= 1000; printf "%.3f\n", v}' \
      "$tmp/q.out" >>"$tmp/qlat"
  fi
done
[ -n "$ipid" ] && kill "$ipid" 2>/dev/null; ipid=
[ -n "$qpid" ] && kill "$qpid" 2>/dev/null; qpid=

gw_bw=$(cat "$tmp"/bw.* | jget bw_GBps | median)
gw_cpu=$(cat "$tmp"/bw.* | jget cpu_initiator_pct | median)/$(cat "$tmp"/bw.* | jget cpu_target_pct | median)
gw_lat=$(cat "$tmp"/lat.* | jget lat_us_p50 | median)
gw_lat_avg=$(cat "$tmp"/lat.* | jget lat_us_avg | median)
gw_slat=$(cat "$tmp"/slat.* | jget lat_us_p50 | median)
gw_slat_avg=$(cat "$tmp"/slat.* | jget lat_us_avg | median)
gw_blat_avg=$(cat "$tmp"/blat.* | jget lat_us_avg | median)
gw_bslat_avg=$(cat "$tmp"/bslat.* | jget lat_us_avg | median)
path=$(sed -n 's/.*"path":"\([^"]*\)".*/\1/p' "$tmp/bw.1")
ip1=$( [ -s "$tmp/ip1" ] && median <"$tmp/ip1")
ip2=$( [ -s "$tmp/ip2" ] && median <"$tmp/ip2")
qbw=$( [ -s "$tmp/qbw" ] && median <"$tmp/qbw")
qlat=$( [ -s "$tmp/qlat" ] && median <"$tmp/qlat")
echo "# every run (gpuwire bw / iperf3 -P1 / -P2 / qperf bw [GB/s]; gpuwire put avg / send avg / busy put avg / busy send avg / qperf lat [us]):"
for i in $(seq "$rep"); do
  printf '#   %s / %s / %s / %s;  %s / %s / %s / %s / %s\n' "$(jget bw_GBps <"$tmp/bw.$i")" "$(sed -n "${i}p" "$tmp/ip1" 2>/dev/null)" \
    "$(sed -n "${i}p" "$tmp/ip2" 2>/dev/null)" "$(sed -n "${i}p" "$tmp/qbw" 2>/dev/null)" \
    "$(jget lat_us_avg <"$tmp/lat.$i")" "$(jget lat_us_avg <"$tmp/slat.$i")" "$(jget lat_us_avg <"$tmp/blat.$i")" \
    "$(jget lat_us_avg <"$tmp/bslat.$i")" "$(sed -n "${i}p" "$tmp/qlat" 2>/dev/null)"
done
echo "# gpuwire path: $path"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "measurement" "gpuwire" "reference" "ref value" "ratio" "target"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "put 4 MiB bandwidth [GB/s]" "$gw_bw" "iperf3 -P 1 [GB/s]" "${ip1:--}" "$(ratio "$gw_bw" "$ip1")" ">= 1.00"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "put 4 MiB bandwidth [GB/s]" "$gw_bw" "iperf3 -P 2 [GB/s]" "${ip2:--}" "$(ratio "$gw_bw" "$ip2")" "(info)"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "put 4 MiB bandwidth [GB/s]" "$gw_bw" "qperf tcp_bw [GB/s]" "${qbw:--}" "$(ratio "$gw_bw" "$qbw")" "(info)"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "put 8 B latency p50 [us]" "$gw_lat" "qperf tcp_lat [us]" "${qlat:--}" "$(ratio "$gw_lat" "$qlat")" "(info)"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "put 8 B latency avg [us]" "$gw_lat_avg" "qperf tcp_lat [us]" "${qlat:--}" "$(ratio "$gw_lat_avg" "$qlat")" "<= 1.10"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "send 8 B latency p50 [us]" "$gw_slat" "qperf tcp_lat [us]" "${qlat:--}" "$(ratio "$gw_slat" "$qlat")" "(info)"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "send 8 B latency avg [us]" "$gw_slat_avg" "qperf tcp_lat [us]" "${qlat:--}" "$(ratio "$gw_slat_avg" "$qlat")" "<= 1.10"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "put 8 B latency avg, busy-poll" "$gw_blat_avg" "qperf tcp_lat [us]" "${qlat:--}" "$(ratio "$gw_blat_avg" "$qlat")" "(info)"
printf '%-34s %12s  %-26s %10s %7s  %s\n' "send 8 B latency avg, busy-poll" "$gw_bslat_avg" "qperf tcp_lat [us]" "${qlat:--}" "$(ratio "$gw_bslat_avg" "$qlat")" "(info)"
echo "# qperf tcp_lat is a mean (one-way, 1-byte messages): the averages are the like-for-like ratios"
echo "# gpuwire CPU during the 4 MiB put bandwidth run (initiator/target, % of one core): $gw_cpu"
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
