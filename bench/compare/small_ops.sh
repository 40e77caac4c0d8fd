#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# small_ops.sh - small-operation rate of gpuwire against UCX's ucx_perftest, in
# one run on this machine, both sides of each pair run back to back (the
# order alternating between repetitions) so that a change in the machine's
# load hits both alike.  Prints operations per second and the ratios issue
# the targets are stated in:
#   tcp   1 KiB put, 1 KiB send, 8 B put   vs UCX_TLS=tcp,self   (>= 1.0x)
#   intra 1 KiB put                        vs UCX_TLS=sm,self    (>= 0.8x)
#
# usage: bench/compare/small_ops.sh [BUILD_DIR]             (default: build)
# Also prints the ratio of operations per CPU-second of the initiating process
# (needs /usr/bin/time).
# env:   REPEAT=3 (pairs per row; the median is reported with the spread),
#        DURATION=2 (seconds per gpuwire run), UCX_ITERS=200000 (operations
#        per ucx_perftest run over tcp; 10x that over sm), WINDOW=1024,
#        ROWS="tcp_put_1k tcp_send_1k tcp_put_8 intra_put_1k intra_alloc_put_1k"
#        (a subset to run), UCX_PORT=13391.
# Needs ucx_perftest (Debian's ucx-utils); without it the script exits 77.
set -u
bld=${1:-build}
tool=$bld/gpuwire
rep=${REPEAT:-3}
dur=${DURATION:-2}
uiters=${UCX_ITERS:-200000}
win=${WINDOW:-1024}
port=${UCX_PORT:-13391}
rows=${ROWS:-"tcp_put_1k tcp_send_1k tcp_put_8 intra_put_1k intra_alloc_put_1k"}
[ -x "$tool" ] || { echo "small_ops: $tool not built" >&2; exit 1; }
command -v ucx_perftest >/dev/null || { echo "small_ops: ucx_perftest not installed (apt-get install ucx-utils)"; exit 77; }
[ -x /usr/bin/time ] || { echo "small_ops: /usr/bin/time not installed (apt-get install time)"; exit 77; }
cpu_time="/usr/bin/time -f %U_%S"
tmp=$(mktemp -d) || exit 1
upid=
cleanup() {
  [ -n "$upid" ] && kill "$upid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# row -> gpuwire transport, gpuwire perf args, UCX_TLS, ucx test, size, ucx iterations
row_def() {
  case $1 in
  tcp_put_1k) echo "tcp|--op put --size 1K|tcp,self|ucp_put_bw|1024|$uiters" ;;
  tcp_send_1k) echo "tcp|--op send --size 1K|tcp,self|tag_bw|1024|$uiters" ;;
  tcp_put_8) echo "tcp|--op put --size 8|tcp,self|ucp_put_bw|8|$uiters" ;;
  intra_put_1k) echo "intra|--op put --size 1K|sm,self|ucp_put_bw|1024|$((uiters * 10))" ;;
  intra_alloc_put_1k) echo "intra|--op put --size 1K --alloc|sm,self|ucp_put_bw|1024|$((uiters * 10))" ;;
  *) echo "small_ops: unknown row $1" >&2; exit 2 ;;
  esac
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }
minmax() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {if (NR) printf "%s-%s", lo, hi; else print "-"}'; }

# gpuwire perf over loopback: operations per second, and per CPU-second of
# the initiator (msg_rate / cpu_initiator_pct) into $tmp/cpu_gw
run_gw() { # transport, args
  GPUWIRE_TRANSPORTS=$1 "$tool" perf --loopback --bw-only --window "$win" --duration "$dur" --json $2 \
    2>>"$tmp/err" | sed -n 's/.*"msg_rate":\([0-9.e+]*\).*"cpu_initiator_pct":\([0-9.e+]*\).*/\1 \2/p' |
    awk -v f="$tmp/cpu_gw" '{printf "%.0f\n", $1; if ($2 > 0) printf "%.0f\n", $1 * 100 / $2 >f}'
}
# ucx_perftest server + client: the Final line's overall message rate (8th column)
run_ucx() { # tls, test, size, iters
  UCX_TLS=$1 ucx_perftest -p "$port" >/dev/null 2>>"$tmp/err" &
  upid=$!
  sleep 0.5
  UCX_TLS=$1 timeout 120 $cpu_time -o "$tmp/ucx_time" ucx_perftest 127.0.0.1 -p "$port" -t "$2" -s "$3" -n "$4" \
    -w 10000 2>>"$tmp/err" | awk '/^Final:/ {print $9}'
  # operations (warm-up included) per CPU-second of the client process
  awk -F_ -v n="$(( $4 + 10000 ))" -v f="$tmp/cpu_ucx" '$1 + $2 > 0 {printf "%.0f\n", n / ($1 + $2) >f}' "$tmp/ucx_time"
  wait "$upid" 2>/dev/null
  upid=
  port=$((port + 1)) # a fresh port: the last one may linger in TIME_WAIT
}

echo "# gpuwire vs ucx_perftest, small-operation rate (operations/s)"
echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# machine: $(uname -srm), $(nproc) CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"
echo "# load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
echo "# gpuwire: $("$tool" --version), window $win, ${dur}s per run; ucx: $(ucx_info -v 2>/dev/null | sed -n '1s/# //p'), $uiters ops per tcp run"
echo "# $rep pairs per row, the two sides alternating; figures are medians [min-max]; ratio of each pair, median [min-max]"
echo "# ratio per CPU-s: operations per CPU-second of the initiating process (gpuwire's cpu_initiator_pct, the"
echo "# ucx_perftest client's user+system time), which the machine's load disturbs less than the wall-clock rate"
echo

for r in $rows; do
  def=$(row_def "$r") || exit 2
  IFS='|' read -r gtl gargs utls utest usize uit <<EOF
$def
EOF
  : >"$tmp/$r.gw"
  : >"$tmp/$r.ucx"
  : >"$tmp/$r.ratio"
  : >"$tmp/$r.cratio"
  for i in $(seq "$rep"); do
    if [ $((i % 2)) = 1 ]; then
      g=$(run_gw "$gtl" "$gargs")
      u=$(run_ucx "$utls" "$utest" "$usize" "$uit")
    else
      u=$(run_ucx "$utls" "$utest" "$usize" "$uit")
      g=$(run_gw "$gtl" "$gargs")
    fi
    [ -n "$g" ] && echo "$g" >>"$tmp/$r.gw"
    [ -n "$u" ] && echo "$u" >>"$tmp/$r.ucx"
    [ -n "$g" ] && [ -n "$u" ] && awk -v a="$g" -v b="$u" 'BEGIN { if (b > 0) printf "%.2f\n", a / b }' >>"$tmp/$r.ratio"
    gc=$(tail -1 "$tmp/cpu_gw" 2>/dev/null)
    uc=$(tail -1 "$tmp/cpu_ucx" 2>/dev/null)
    [ -n "$g" ] && [ -n "$u" ] && [ -n "$gc" ] && [ -n "$uc" ] &&
      awk -v a="$gc" -v b="$uc" 'BEGIN { if (b > 0) printf "%.2f\n", a / b }' >>"$tmp/$r.cratio"
    rm -f "$tmp/cpu_gw" "$tmp/cpu_ucx"
  done
done

printf '%-20s %-24s %-12s %-26s %-26s %-18s %s\n' row gpuwire ucx "gpuwire ops/s" "ucx ops/s" "ratio" "ratio per CPU-s"
for r in $rows; do
  def=$(row_def "$r")
  IFS='|' read -r gtl gargs utls utest usize uit <<EOF
$def
EOF
  printf '%-20s %-24s %-12s %-26s %-26s %-18s %s\n' "$r" "$gtl $(echo "$gargs" | sed 's/--op //; s/--size //')" \
    "$utls" "$(median <"$tmp/$r.gw") [$(minmax <"$tmp/$r.gw")]" \
    "$(median <"$tmp/$r.ucx") [$(minmax <"$tmp/$r.ucx")]" "$(median <"$tmp/$r.ratio") [$(minmax <"$tmp/$r.ratio")]" \
    "$(median <"$tmp/$r.cratio") [$(minmax <"$tmp/$r.cratio")]"
done
if [ -s "$tmp/err" ]; then
  echo
  echo "# stderr of the runs (last lines):"
  grep -v '^\[' "$tmp/err" | tail -5 | sed 's/^/#   /'
fi
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
