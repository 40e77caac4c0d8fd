#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verbs_small.sh [BUILD_DIR] - small-operation rate of gpuwire over verbs
# against perftest on the Soft-RoCE device of the qemu guest:
# puts against ib_write_bw, sends against ib_send_bw, 8 B to 4 KiB, the
# same size, the same number of operations and the same outstanding depth
# (128: perftest's default tx depth, gw_verbs_bench's WINDOW); and the
# 8-byte put latency against ib_write_lat (OPS="... lat").
#
# Operations per second: gw_verbs_bench's ops_s, perftest's MsgRate[Mpps].
# REPS rounds per row; in each round both tools run once, the order
# alternating between rounds (the host's load drifts); each round's pair
# gives a ratio.  Printed per row: best and median of each side, and the
# median and range of the pair ratios (gpuwire / perftest: >= 1.0 is the
# goal; for lat the ratio of one-way medians, <= 1.0 is the goal).  When
# perftest's values fall in two groups (the host's speed modes, more than 15%
# apart), a "by mode" line gives the pair-ratio medians of each group.
# OLD_BENCH=path/to/another/gw_verbs_bench adds that build as a third side
# in every round (before/after in one guest boot).  A perftest client that
# fails to connect (the server not listening yet) is retried.
#
# Unattended, one command:  bench/compare/verbs_small.sh build
# Knobs: SIZES ("8 64 1024 4096"), OPS ("put send lat"), N (5000
# operations per run; lat: LAT_N, 2000 round trips), REPS (5 rounds per row;
# lat: LAT_REPS, default REPS), LAT_LOOPS ("complete progress": gw_verbs_bench's
# ping-pong loops, GW_BENCH_LAT, one lat row each; complete is
# ib_write_lat's: put, wait for its completion, watch memory; untracked
# puts without asking for a completion, UCX's put_nbi shape, then watches
# as complete does).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build}" && pwd) || { echo "no build dir" >&2; exit 2; }
if [ -z "${RXE_DEV:-}" ]; then
  [ -x "$B/tests/verbs/gw_verbs_bench" ] || { echo "build first" >&2; exit 2; }
  echo "# host: $(uname -n) $(nproc) CPUs, $(uptime)"
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-2400} "$HERE/../../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_small.sh" "$B"
fi
REPS=${REPS:-5}
GW=$B/tests/verbs/gw_verbs_bench
OLD=${OLD_BENCH:-}
PORT=18515
echo "# verbs_small: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), guest $(uname -r), $(nproc) vCPUs, $RXE_DEV," \
     "guest load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# gpuwire $(git -C "$HERE/../.." describe --always --dirty 2>/dev/null || echo ?)${OLD:+, old: $OLD}; $REPS rounds per row, order alternating"

gw_run() {  # bench op size n -> ops/s (lat: one-way median in us)
  local out
  if [ "$2" = lat ]; then
    if [ "$1" = "$OLD" ] && [ "${GW_BENCH_LAT:-}" = untracked ]; then
      # a build before the untracked loop: its progress loop with the
      # complete loop's polling is the same loop (untracked put, watch)
      out=$(GW_BENCH_LAT=progress GW_BENCH_POLL_EVERY=${GW_BENCH_POLL_EVERY:-1048576} \
            timeout 120 "$1" lat "$3" "$4" "$RXE_DEV" "$RXE_DEV" 2>/dev/null)
      echo "$out" | sed -n 's/.*typical_usec=\([0-9.]*\).*/\1/p'
      return
    fi
    out=$(timeout 120 "$1" lat "$3" "$4" "$RXE_DEV" "$RXE_DEV" 2>/dev/null)
    echo "$out" | sed -n 's/.*typical_usec=\([0-9.]*\).*/\1/p'
  else
    out=$(timeout 90 "$1" "$2" "$3" "$4" "$RXE_DEV" "$RXE_DEV" 2>/dev/null)
    echo "$out" | sed -n 's/.*ops_s=\([0-9.]*\).*/\1/p'
  fi
}
pt_run() {  # op size n -> ops/s (lat: t_typical in us)
  local tool extra=""
  case $1 in put) tool=ib_write_bw ;; send) tool=ib_send_bw ;; lat) tool=ib_write_lat ;; esac
  [ "$1" = lat ] || extra="--report_gbits"
  PORT=$((PORT + 1)); [ $PORT -gt 18600 ] && PORT=18516   # a fresh port: no bind race with the last server
  local args="-d $RXE_DEV -x $RXE_GID_INDEX -s $2 -n $3 -F -p $PORT $extra"
  timeout 90 $tool $args > /tmp/vs.srv 2>&1 & local sp=$!
  local try
  for try in 1 2 3 4 5 6 7 8; do
    sleep 0.5
    timeout 90 $tool $args 127.0.0.1 > /tmp/vs.cli 2>&1 && break
    kill -0 $sp 2>/dev/null || break   # the server gave up: no point retrying
  done
  wait $sp
  if [ "$1" = lat ]; then
    awk '/t_avg/{getline; print $5; exit}' /tmp/vs.cli
  else   # MsgRate[Mpps], the larger of the two sides' reports (a side may print 0 at tiny sizes)
    cat /tmp/vs.cli /tmp/vs.srv | awk '/BW average/{getline; if ($5 + 0 > m + 0) m = $5} END{if (m + 0 > 0) printf "%.0f\n", m * 1e6}'
  fi
}
stats() {  # file lower_is_better -> "best median min max" of the non-empty numbers
  grep -E '^[0-9.]+$' "$1" | sort -g | awk -v low="$2" '{v[NR] = $1} END{
    if (NR == 0) { print "- - - -"; exit }
    med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%s %s %s %s\n", (low ? v[1] : v[NR]), med, v[1], v[NR] }'
}
fmt() { awk -v x="$1" 'BEGIN{ if (x == "-" || x == "") print "-"; else if (x + 0 >= 100) printf "%.0f", x; else printf "%.3f", x }'; }
# modes FILE: rounds "gpuwire old perftest" -> the host's two speed modes, if
# any: perftest's values split in two by 1-D 2-means (the cut halfway between
# the groups' means); when the means differ by over 15%, per mode the rounds
# and the pair-ratio medians (gpuwire, old).  The guest's host switches
# between modes every few seconds (docs/PERFORMANCE.md, section 2), and the
# pair ratio differs by mode; prints nothing for one mode.
modes() {
  awk '$1 ~ /^[0-9.]+$/ && $3 ~ /^[0-9.]+$/ && $3 > 0 { n++; g[n] = $1; o[n] = $2; p[n] = $3 }
  function med(a, k,   i, j, t) { for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
  END { if (n < 4) exit
    lo = hi = p[1]; for (i = 2; i <= n; i++) { if (p[i] < lo) lo = p[i]; if (p[i] > hi) hi = p[i] }
    cut = (lo + hi) / 2
    for (it = 0; it < 50; it++) { s0 = s1 = k0 = k1 = 0
      for (i = 1; i <= n; i++) if (p[i] > cut) { s1 += p[i]; k1++ } else { s0 += p[i]; k0++ }
      if (!k0 || !k1) exit
      c = (s0 / k0 + s1 / k1) / 2; if (c == cut) break; cut = c }
    if ((s1 / k1) / (s0 / k0) < 1.15) exit
    out = ""
    for (m = 0; m < 2; m++) { k = 0; ko = 0
      for (i = 1; i <= n; i++) if ((p[i] > cut) == m) { r[++k] = g[i] / p[i]; if (o[i] ~ /^[0-9.]+$/) ro[++ko] = o[i] / p[i] }
      out = out sprintf("%sperftest %s %s: %d rounds, pair ratio median %.3f%s", out == "" ? "" : "; ",
            m ? "above" : "at or below", cut >= 100 ? sprintf("%.0f", cut) : sprintf("%.2f", cut), k, med(r, k),
            ko ? sprintf(", old %.3f", med(ro, ko)) : "")
      delete r; delete ro }
    print out }' "$1"
}

for opl in ${OPS:-put send lat}; do
 loops=-; [ "$opl" = lat ] && loops=${LAT_LOOPS:-complete progress}
 for loop in $loops; do
  op=$opl; label=$op
  if [ "$op" = lat ]; then export GW_BENCH_LAT=$loop; label="lat ($loop loop)"; fi
  sizes=${SIZES:-8 64 1024 4096}; [ "$op" = lat ] && sizes=8
  for s in $sizes; do
    n=${N:-5000}; reps=$REPS; [ "$op" = lat ] && { n=${LAT_N:-2000}; reps=${LAT_REPS:-$REPS}; }
    unit="ops/s"; low=0; [ "$op" = lat ] && { unit="us one-way"; low=1; }
    : > /tmp/vs.g; : > /tmp/vs.o; : > /tmp/vs.p; : > /tmp/vs.r; : > /tmp/vs.ro; : > /tmp/vs.t
    for r in $(seq "$reps"); do
      g=""; o=""; p=""
      if [ $((r % 2)) = 1 ]; then
        g=$(gw_run "$GW" "$op" "$s" "$n"); [ -n "$OLD" ] && o=$(gw_run "$OLD" "$op" "$s" "$n"); p=$(pt_run "$op" "$s" "$n")
      else
        p=$(pt_run "$op" "$s" "$n"); [ -n "$OLD" ] && o=$(gw_run "$OLD" "$op" "$s" "$n"); g=$(gw_run "$GW" "$op" "$s" "$n")
      fi
      echo "$g" >> /tmp/vs.g; echo "$o" >> /tmp/vs.o; echo "$p" >> /tmp/vs.p; echo "${g:--} ${o:--} ${p:--}" >> /tmp/vs.t
      num() { [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]]; }   # perftest may print "inf"
      num "$g" && num "$p" && awk -v a="$g" -v b="$p" 'BEGIN{ if (b + 0 > 0) printf "%.3f\n", a / b }' >> /tmp/vs.r
      num "$o" && num "$p" && awk -v a="$o" -v b="$p" 'BEGIN{ if (b + 0 > 0) printf "%.3f\n", a / b }' >> /tmp/vs.ro
      echo "  $label $s round $r: gpuwire ${g:-fail}${OLD:+ old ${o:-fail}} perftest ${p:-fail} $unit"
    done
    read -r gb gm _ _ < <(stats /tmp/vs.g $low); read -r pb pm _ _ < <(stats /tmp/vs.p $low)
    read -r _ rm rmin rmax < <(stats /tmp/vs.r 0)
    line="$label $s ($unit, $reps rounds): gpuwire best $(fmt "$gb") median $(fmt "$gm"); perftest best $(fmt "$pb") median $(fmt "$pm")"
    line="$line; pair ratio median $rm [$rmin-$rmax]"
    if [ -n "$OLD" ]; then
      read -r ob om _ _ < <(stats /tmp/vs.o $low); read -r _ orm ormin ormax < <(stats /tmp/vs.ro 0)
      line="$line; old best $(fmt "$ob") median $(fmt "$om"), ratio median $orm [$ormin-$ormax]"
    fi
    echo "$line"
    m=$(modes /tmp/vs.t); [ -n "$m" ] && echo "  $label $s by mode: $m"
  done
 done
done
