#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tl_ab.sh OLD_BUILD NEW_BUILD - two builds of gpuwire side by side on the
# rows of bench/tcp_loopback.sh (4 MiB put bandwidth, 8-byte put and send
# latency) and the gpuwire side of bench/small_ops.sh (operation rates over
# tcp and intra), the two builds alternating REPS times (default 3) so that
# machine load hits both alike.  For structural changes that must not cost
# speed: prints each row's median for both and the ratio new/old (higher is
# better for rates and bandwidth, lower for latency).  DUR seconds per run
# (default 2).  Needs no reference tools (iperf3, qperf, ucx_perftest).
set -u
old=${1:?usage: tl_ab.sh OLD_BUILD NEW_BUILD}/gpuwire
new=${2:?usage: tl_ab.sh OLD_BUILD NEW_BUILD}/gpuwire
reps=${REPS:-3}
dur=${DUR:-2}
for t in "$old" "$new"; do [ -x "$t" ] || { echo "tl_ab: $t not built" >&2; exit 1; }; done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }
# row: name|transport|key|perf args   (key: the JSON field reported)
rows='tcp_bw_4M|tcp|bw_GBps|--op put --size 4M --bw-only
tcp_lat_put_8|tcp|lat_us_p50|--op put --size 8 --lat-only
tcp_lat_send_8|tcp|lat_us_p50|--op send --size 8 --lat-only
tcp_rate_put_1k|tcp|msg_rate|--op put --size 1K --bw-only --window 1024
tcp_rate_send_1k|tcp|msg_rate|--op send --size 1K --bw-only --window 1024
tcp_rate_put_8|tcp|msg_rate|--op put --size 8 --bw-only --window 1024
intra_rate_put_1k|intra|msg_rate|--op put --size 1K --bw-only --window 1024
intra_rate_alloc_put_1k|intra|msg_rate|--op put --size 1K --alloc --bw-only --window 1024'
echo "# tl_ab: $old vs $new"
echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC'); load $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "# machine: $(uname -srm), $(nproc) CPUs; $reps alternating runs of ${dur}s per build and row, medians"
printf '%-26s %14s %14s %8s\n' row old new new/old
echo "$rows" | while IFS='|' read -r name tl key args; do
  : >"$tmp/o"; : >"$tmp/n"
  i=0
  while [ $i -lt "$reps" ]; do
    for side in o n; do
      [ $side = o ] && bin=$old || bin=$new
      # shellcheck disable=SC2086
      GPUWIRE_TRANSPORTS=$tl "$bin" perf --loopback --duration "$dur" --json $args 2>>"$tmp/err" |
        sed -n "s/.*\"$key\":\([-0-9.e+]*\).*/\1/p" >>"$tmp/$side"
    done
    i=$((i + 1))
  done
  a=$(median <"$tmp/o"); b=$(median <"$tmp/n")
  r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a == "-" || b == "-" || a + 0 == 0) print "-"; else printf "%.3f", b / a }')
  printf '%-26s %14s %14s %8s\n' "$name" "$a" "$b" "$r"
done
[ -s "$tmp/err" ] && { echo "# stderr:"; tail -5 "$tmp/err"; }
exit 0
