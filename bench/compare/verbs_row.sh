#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verbs_row.sh [BUILD_DIR] - one operation at one size, gpuwire and perftest
# alternating REPS times in one Soft-RoCE guest run (rxe0 loopback): for
# re-checking single rows of bench/compare/verbs_rxe.sh, whose ratios swing with the
# host's load.  OLD_BENCH=path/to/another/gw_verbs_bench adds a third column
# (e.g. a build of an older commit) to tell a change from noise.
# Knobs: OP=put|get|send|lat (default put), S=bytes (262144; lat: 8),
#        N=operations (64; lat: 2000), REPS (5).  Prints one line per round,
#        then the best of each column (lat: the lowest median one-way time in
#        us against ib_write_lat's t_typical; ratio gpuwire/perftest, lower
#        is better there).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build}" && pwd) || { echo "no build dir" >&2; exit 2; }
if [ -z "${RXE_DEV:-}" ]; then
  [ -x "$B/tests/verbs/gw_verbs_bench" ] || { echo "build first" >&2; exit 2; }
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-900} "$HERE/../../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_row.sh" "$B"
fi
OP=${OP:-put}
if [ "$OP" = lat ]; then S=${S:-8}; N=${N:-2000}; else S=${S:-262144}; N=${N:-64}; fi
REPS=${REPS:-5}
case $OP in put) TOOL=ib_write_bw ;; get) TOOL=ib_read_bw ;; send) TOOL=ib_send_bw ;; lat) TOOL=ib_write_lat ;;
  *) echo "OP must be put, get, send or lat" >&2; exit 2 ;; esac
UNIT="Gb/s"; [ "$OP" = lat ] && UNIT="us"
gw() {
  if [ "$OP" = lat ]; then
    timeout 120 "$1" lat "$S" "$N" "$RXE_DEV" "$RXE_DEV" 2>/dev/null | sed -n 's/.*typical_usec=//p'
  else
    timeout 60 "$1" "$OP" "$S" "$N" "$RXE_DEV" "$RXE_DEV" 2>/dev/null | sed -n 's/.*bw_gbps=//p'
  fi
}
pt() {
  local extra="--report_gbits"; [ "$OP" = lat ] && extra=""
  timeout 60 $TOOL -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$S" -n "$N" -F $extra > /tmp/ab.srv 2>&1 &
  local sp=$!; sleep 0.5
  timeout 60 $TOOL -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$S" -n "$N" -F $extra 127.0.0.1 > /tmp/ab.cli 2>&1
  wait $sp
  if [ "$OP" = lat ]; then
    awk '/t_avg/{getline; print $5; exit}' /tmp/ab.cli
  else
    cat /tmp/ab.cli /tmp/ab.srv | awk '/BW average/{getline; if ($4 + 0 > m + 0) m = $4} END{print m}'
  fi
}
best() { if [ "$OP" = lat ]; then grep -v '^0$' | sort -g | head -1; else sort -g | tail -1; fi; }
: > /tmp/ab.g; : > /tmp/ab.o; : > /tmp/ab.p
for r in $(seq "$REPS"); do
  g=$(gw "$B/tests/verbs/gw_verbs_bench"); echo "${g:-0}" >> /tmp/ab.g
  o=""; [ -n "${OLD_BENCH:-}" ] && { o=$(gw "$OLD_BENCH"); echo "${o:-0}" >> /tmp/ab.o; }
  p=$(pt); echo "${p:-0}" >> /tmp/ab.p
  echo "$OP $S round $r: gpuwire ${g:-fail}${OLD_BENCH:+ old ${o:-fail}} perftest ${p:-fail} $UNIT"
done
g=$(best < /tmp/ab.g); p=$(best < /tmp/ab.p)
echo "$OP $S best of $REPS: gpuwire $g${OLD_BENCH:+ old $(best < /tmp/ab.o)} perftest $p ratio $(awk -v a="$g" -v b="$p" 'BEGIN{ if (b + 0 == 0) print "n/a"; else printf "%.2f", a / b }')"
